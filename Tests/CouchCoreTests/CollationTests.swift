import CouchCore
import Testing

/// CouchDB's documented view collation ("Views Collation" in its documentation): each list
/// is in ascending order, and both the comparison and the byte order of sort keys agree.
@Suite struct CollationTests {
    /// The documentation's example, in its order.
    static let documentedOrder: [String] = [
        "null", "false", "true",
        "1", "2", "3.0", "4",
        #""a""#, #""A""#, #""aa""#, #""b""#, #""B""#, #""ba""#, #""bb""#,
        #"["a"]"#, #"["b"]"#, #"["b","c"]"#, #"["b","c","a"]"#, #"["b","d"]"#, #"["b","d","e"]"#,
        #"{"a":1}"#, #"{"a":2}"#, #"{"b":1}"#, #"{"b":2}"#, #"{"b":2,"a":1}"#, #"{"b":2,"c":2}"#,
    ]

    private func values(_ texts: [String]) throws -> [JSONValue] {
        try texts.map { try JSONValue.parse(Array($0.utf8)) }
    }

    private func lexicographic(_ a: [UInt8], _ b: [UInt8]) -> Bool { a.lexicographicallyPrecedes(b) }

    @Test func documentedOrderHoldsForComparisonAndSortKeys() throws {
        let ordered = try values(Self.documentedOrder)
        for (index, value) in ordered.enumerated() {
            for later in ordered[(index + 1)...] {
                #expect(Collation.compare(value, later) == -1, "\(value.serializedString()) < \(later.serializedString())")
                #expect(Collation.compare(later, value) == 1)
                #expect(lexicographic(Collation.sortKey(value), Collation.sortKey(later)),
                        "sort key of \(value.serializedString()) before \(later.serializedString())")
            }
        }
        // Shuffled and sorted again by either means, the list comes back in its order.
        let shuffled = ordered.shuffled()
        #expect(shuffled.sorted { Collation.compare($0, $1) < 0 } == ordered)
        #expect(shuffled.sorted { lexicographic(Collation.sortKey($0), Collation.sortKey($1)) } == ordered)
    }

    /// Letters: a dictionary order, lower case before upper case of the same letter, not the
    /// code point order ("B" < "a" by code point).
    @Test func lettersSortAsADictionaryDoes() {
        let letters = "abcdefghijklmnopqrstuvwxyz".flatMap { [String($0), $0.uppercased()] }
        let shuffled = letters.shuffled().map(JSONValue.string)
        #expect(shuffled.sorted { Collation.compare($0, $1) < 0 } == letters.map(JSONValue.string))
        #expect(Collation.compare("B", "a") == 1)
        #expect(Collation.compare("é", "f") == -1)   // by code point "é" (U+00E9) sorts after "f"
        // Digits come before letters, and numbers compare by value, not by text.
        #expect(Collation.compare("9", "a") == -1)
        #expect(Collation.compare(try! JSONValue.parse(Array("10".utf8)), try! JSONValue.parse(Array("9.5".utf8))) == 1)
        #expect(Collation.compare(try! JSONValue.parse(Array("1".utf8)), try! JSONValue.parse(Array("1.0".utf8))) == 0)
        #expect(Collation.sortKey(try! JSONValue.parse(Array("1".utf8))) == Collation.sortKey(try! JSONValue.parse(Array("1.0".utf8))))
    }

    @Test func negativeNumbersAndNestedValuesKeepTheirOrder() throws {
        let ordered = try values(["-1e300", "-2", "-1.5", "0", "1e-9", "7", "1e300",
                                  #"[null]"#, #"[1,"x"]"#, #"[1,[2]]"#, #"[1,[2,0]]"#, #"[1,{}]"#, #"[2]"#, #"{}"#])
        for (value, next) in zip(ordered, ordered.dropFirst()) {
            #expect(Collation.compare(value, next) == -1)
            #expect(lexicographic(Collation.sortKey(value), Collation.sortKey(next)))
        }
        #expect(Collation.sortKey(try JSONValue.parse(Array("-0.0".utf8))) == Collation.sortKey(try JSONValue.parse(Array("0".utf8))))
        // Every key sorts before the bound used for "everything".
        #expect(ordered.allSatisfy { lexicographic(Collation.sortKey($0), Collation.greatestKey) })
    }
}
