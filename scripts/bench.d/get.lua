-- GET /DB/ID over existing documents, each connection cycling through its own
-- slice of ids (requests are built once in init, so wrk spends no time per request).
-- Arguments (after --): DB COUNT ID_FORMAT, e.g. bench 100000 bench-%07d
package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;" .. package.path
local report = require("report")

local threads = {}
local requests = {}
local position = 1

function setup(thread)
   thread:set("thread_number", #threads)
   table.insert(threads, thread)
end

function init(args)
   local db, count, format = args[1], tonumber(args[2]), args[3]
   local prebuilt = math.min(count, 20000)
   local stride = math.max(1, math.floor(count / prebuilt))
   local offset = ((thread_number or 0) * 7919) % prebuilt
   for i = 0, prebuilt - 1 do
      local index = ((i + offset) % prebuilt) * stride
      requests[#requests + 1] = wrk.format("GET", "/" .. db .. "/" .. string.format(format, index))
   end
end

function request()
   local r = requests[position]
   position = position % #requests + 1
   return r
end

done = report.done
