import CouchCore
import Testing

/// Dates as CouchDB writes them (HTTP's `Date`, replication histories, `_scheduler`).
@Suite struct TimestampTests {
    @Test func formatsInUTC() {
        #expect(Timestamp.rfc1123(0) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(Timestamp.rfc1123(1_493_442_097) == "Sat, 29 Apr 2017 05:01:37 GMT")
        #expect(Timestamp.iso8601(1_493_442_097) == "2017-04-29T05:01:37Z")
        #expect(Timestamp.iso8601(951_782_400) == "2000-02-29T00:00:00Z")
    }

    @Test func readsWhatItWritesAndOffsets() {
        for seconds in [0, 951_782_400, 1_493_442_097, 1_795_500_000] {
            #expect(Timestamp.seconds(iso8601: Timestamp.iso8601(seconds)) == seconds)
        }
        #expect(Timestamp.seconds(iso8601: "2017-04-29T07:01:37+02:00") == 1_493_442_097)
        #expect(Timestamp.seconds(iso8601: "2017-04-29T00:31:37-04:30") == 1_493_442_097)
        for text in ["", "2017-04-29", "2017-04-29T05:01:37", "2017-04-29 05:01:37Z", "2017-13-29T05:01:37Z",
                     "2017-04-29T25:01:37Z", "2017-04-29T05:01:37+0200", "２017-04-29T05:01:37Z"] {
            #expect(Timestamp.seconds(iso8601: text) == nil, "\(text)")
        }
    }
}
