-- PUT /DB/ID of new documents with a fixed 1 KB JSON body; ids are unique per run,
-- thread and request, so every request creates a document (201).
-- Arguments (after --): DB BODY_FILE RUN_TAG
package.path = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "?.lua;" .. package.path
local report = require("report")

local threads = {}
local prefix, body
local counter = 0
local headers = { ["Content-Type"] = "application/json" }

function setup(thread)
   thread:set("thread_number", #threads)
   table.insert(threads, thread)
end

function init(args)
   local db, body_file, tag = args[1], args[2], args[3]
   local file = assert(io.open(body_file, "rb"))
   body = file:read("*a")
   file:close()
   prefix = "/" .. db .. "/" .. tag .. "-t" .. (thread_number or 0) .. "-"
end

function request()
   counter = counter + 1
   return wrk.format("PUT", prefix .. counter, headers, body)
end

done = report.done
