import Testing
@testable import CouchCore

private func selector(_ text: String) throws -> MangoSelector {
    try MangoSelector(JSONValue.parse(text))
}

/// Whether the selector (JSON text) matches the document (JSON text).
private func matches(_ selectorText: String, _ documentText: String) throws -> Bool {
    try selector(selectorText).matches(JSONValue.parse(documentText))
}

/// The validation error's reason, or nil if the selector is valid.
private func reason(_ selectorText: String) throws -> String? {
    let value = try JSONValue.parse(selectorText)
    do {
        _ = try MangoSelector(value)
        return nil
    } catch {
        return error.reason
    }
}

private func normalized(_ selectorText: String) throws -> String {
    try selector(selectorText).normalized.serializedString()
}

@Suite struct MangoSelectorTests {
    // MARK: Implicit operators and fields

    @Test func implicitEquality() throws {
        #expect(try matches(#"{"name":"Bob"}"#, #"{"_id":"1","name":"Bob"}"#))
        #expect(try !matches(#"{"name":"Bob"}"#, #"{"_id":"1","name":"bob"}"#))
        #expect(try !matches(#"{"name":"Bob"}"#, #"{"_id":"1"}"#))
        #expect(try matches(#"{"n":1}"#, #"{"n":1.0}"#))  // numbers compare by value
        #expect(try matches(#"{"v":null}"#, #"{"v":null}"#))
        #expect(try !matches(#"{"v":null}"#, #"{}"#))
    }

    @Test func implicitAndOfSeveralFields() throws {
        let s = #"{"type":"user","age":30}"#
        #expect(try matches(s, #"{"type":"user","age":30}"#))
        #expect(try !matches(s, #"{"type":"user","age":31}"#))
        #expect(try !matches(s, #"{"type":"post","age":30}"#))
        #expect(try normalized(s) == #"{"$and":[{"type":{"$eq":"user"}},{"age":{"$eq":30}}]}"#)
    }

    @Test func equalityOnArraysIsWholeValue() throws {
        // Unlike MongoDB, no implicit matching of array elements.
        #expect(try !matches(#"{"tags":"a"}"#, #"{"tags":["a","b"]}"#))
        #expect(try matches(#"{"tags":["a","b"]}"#, #"{"tags":["a","b"]}"#))
        #expect(try !matches(#"{"tags":["a","b"]}"#, #"{"tags":["b","a"]}"#))
    }

    @Test func nestedObjectsBecomeDottedPaths() throws {
        let s = #"{"a":{"b":{"c":1}}}"#
        #expect(try normalized(s) == #"{"a.b.c":{"$eq":1}}"#)
        #expect(try matches(s, #"{"a":{"b":{"c":1,"d":2}}}"#))
        #expect(try !matches(s, #"{"a":{"b":{"c":2}}}"#))
        #expect(try !matches(s, #"{"a":{"b":5}}"#))
        #expect(try matches(#"{"a.b.c":1}"#, #"{"a":{"b":{"c":1}}}"#))
        #expect(try normalized(#"{"a":{"b":1,"c":{"$gt":2}}}"#) == #"{"$and":[{"a.b":{"$eq":1}},{"a.c":{"$gt":2}}]}"#)
        // An object value in an explicit $eq is compared whole.
        #expect(try matches(#"{"a":{"$eq":{"b":1}}}"#, #"{"a":{"b":1}}"#))
        #expect(try !matches(#"{"a":{"$eq":{"b":1}}}"#, #"{"a":{"b":1,"c":2}}"#))
    }

    @Test func escapedDotsNameOneKey() throws {
        // JSON "a\\.b" is the field name a\.b, i.e. the key "a.b".
        let s = #"{"a\\.b":1}"#
        #expect(try matches(s, #"{"a.b":1}"#))
        #expect(try !matches(s, #"{"a":{"b":1}}"#))
        #expect(try matches(#"{"x.a\\.b.c":true}"#, #"{"x":{"a.b":{"c":true}}}"#))
        #expect(try matches(#"{"x":{"a\\.b":true}}"#, #"{"x":{"a.b":true}}"#))
    }

    @Test func arrayIndicesInPaths() throws {
        let doc = #"{"tags":["a","x"],"items":[{"n":1},{"n":2}]}"#
        #expect(try matches(#"{"tags.1":"x"}"#, doc))
        #expect(try !matches(#"{"tags.0":"x"}"#, doc))
        #expect(try matches(#"{"items.1.n":2}"#, doc))
        #expect(try !matches(#"{"tags.5":"x"}"#, doc))  // out of range
        #expect(try !matches(#"{"tags.-1":"x"}"#, doc))
        #expect(try !matches(#"{"tags.first":"x"}"#, doc))
        #expect(try !matches(#"{"tags.5":{"$exists":false}}"#, doc))  // a bad path is not "missing"
    }

    @Test func emptySelectorMatchesEverything() throws {
        let s = try selector("{}")
        #expect(s.matches(["_id": "x"]))
        #expect(s.matches([:]))
        #expect(s.normalized == [:])
    }

    // MARK: Comparison operators

    @Test func comparisonsOnNumbers() throws {
        let doc = #"{"n":5}"#
        #expect(try matches(#"{"n":{"$lt":6}}"#, doc))
        #expect(try !matches(#"{"n":{"$lt":5}}"#, doc))
        #expect(try matches(#"{"n":{"$lte":5}}"#, doc))
        #expect(try !matches(#"{"n":{"$lte":4.99}}"#, doc))
        #expect(try matches(#"{"n":{"$gt":4.5}}"#, doc))
        #expect(try !matches(#"{"n":{"$gt":5}}"#, doc))
        #expect(try matches(#"{"n":{"$gte":5.0}}"#, doc))
        #expect(try !matches(#"{"n":{"$gte":6}}"#, doc))
        #expect(try matches(#"{"n":{"$eq":5}}"#, doc))
        #expect(try matches(#"{"n":{"$ne":6}}"#, doc))
        #expect(try !matches(#"{"n":{"$ne":5}}"#, doc))
        #expect(try matches(#"{"n":{"$gt":1,"$lt":10}}"#, doc))
        #expect(try !matches(#"{"n":{"$gt":1,"$lt":5}}"#, doc))
    }

    @Test func bigIntegersCompareExactly() throws {
        let doc = #"{"n":123456789012345678901234567891}"#
        #expect(try matches(#"{"n":{"$gt":123456789012345678901234567890}}"#, doc))
        #expect(try !matches(#"{"n":{"$gt":123456789012345678901234567891}}"#, doc))
        #expect(try matches(#"{"n":{"$lt":-5}}"#, #"{"n":-123456789012345678901234567890}"#))
        #expect(try matches(#"{"n":{"$gt":1e20}}"#, #"{"n":123456789012345678901234567890}"#))
    }

    @Test func missingFieldsMatchOnlyExistsFalse() throws {
        let doc = #"{"_id":"d","other":1}"#
        for op in ["$lt", "$lte", "$eq", "$ne", "$gte", "$gt"] {
            #expect(try !matches(#"{"a":{"\#(op)":1}}"#, doc), "\(op)")
        }
        #expect(try !matches(#"{"a":{"$in":[1]}}"#, doc))
        #expect(try !matches(#"{"a":{"$nin":[1]}}"#, doc))
        #expect(try !matches(#"{"a":{"$type":"null"}}"#, doc))
        #expect(try matches(#"{"a":{"$exists":false}}"#, doc))
        #expect(try !matches(#"{"a":{"$exists":true}}"#, doc))
    }

    @Test func collationOrderAcrossTypes() throws {
        // null < false < true < numbers < strings < arrays < objects
        let ascending = [#"null"#, #"false"#, #"true"#, #"-1"#, #"2.5"#, #""""#, #""a""#, #"[]"#, #"[1]"#, #"{}"#, #"{"a":1}"#]
        for (i, lower) in ascending.enumerated() {
            for (j, higher) in ascending.enumerated() {
                let doc = #"{"v":\#(lower)}"#
                #expect(try matches(#"{"v":{"$lt":\#(higher)}}"#, doc) == (i < j), "\(lower) < \(higher)")
                #expect(try matches(#"{"v":{"$eq":\#(higher)}}"#, doc) == (i == j), "\(lower) == \(higher)")
            }
        }
        // So $gt on a number is true for any string, array or object.
        #expect(try matches(#"{"v":{"$gt":5}}"#, #"{"v":"str"}"#))
        #expect(try !matches(#"{"v":{"$gt":5}}"#, #"{"v":true}"#))
    }

    @Test func stringsCompareByICUCollation() throws {
        // As CouchDB: ICU's root collator, so "a" < "B" < "b" and "é" sorts beside "e".
        #expect(try matches(#"{"s":{"$lt":"B"}}"#, #"{"s":"a"}"#))
        #expect(try matches(#"{"s":{"$gt":"a"}}"#, #"{"s":"B"}"#))
        #expect(try matches(#"{"s":{"$lt":"b"}}"#, #"{"s":"abc"}"#))
        #expect(try matches(#"{"s":{"$lt":"z"}}"#, #"{"s":"é"}"#))
        #expect(try matches(#"{"s":{"$lt":"ab"}}"#, #"{"s":"a"}"#))
    }

    @Test func arraysAndObjectsCollateElementwise() throws {
        #expect(try matches(#"{"v":{"$lt":[1,3]}}"#, #"{"v":[1,2,9]}"#))
        #expect(try matches(#"{"v":{"$lt":[1,2,0]}}"#, #"{"v":[1,2]}"#))
        #expect(try matches(#"{"v":{"$lt":{"b":1}}}"#, #"{"v":{"a":9}}"#))
        // Objects compare member by member in order, as in CouchDB.
        #expect(try !matches(#"{"v":{"$eq":{"x":1,"y":2}}}"#, #"{"v":{"y":2,"x":1}}"#))
        #expect(try matches(#"{"v":{"$eq":{"x":1,"y":2}}}"#, #"{"v":{"x":1,"y":2.0}}"#))
    }

    @Test func idUsesErlangTermOrder() throws {
        // For _id, strings sort after arrays (Erlang term order); elsewhere before (collation).
        #expect(try !matches(#"{"_id":{"$lt":[]}}"#, #"{"_id":"x"}"#))
        #expect(try matches(#"{"other":{"$lt":[]}}"#, #"{"other":"x"}"#))
        #expect(try matches(#"{"_id":{"$gt":"a"}}"#, #"{"_id":"b"}"#))
        #expect(try matches(#"{"_id":{"$gte":"doc:","$lt":"doc;"}}"#, #"{"_id":"doc:123"}"#))
        #expect(try !matches(#"{"_id":{"$gte":"doc:","$lt":"doc;"}}"#, #"{"_id":"other"}"#))
    }

    // MARK: Object operators

    @Test func existsOperator() throws {
        #expect(try matches(#"{"a":{"$exists":true}}"#, #"{"a":null}"#))
        #expect(try !matches(#"{"a":{"$exists":false}}"#, #"{"a":null}"#))
        #expect(try matches(#"{"a.b":{"$exists":false}}"#, #"{"a":{}}"#))
        #expect(try !matches(#"{"a.b":{"$exists":false}}"#, #"{"a":5}"#))  // bad path, as in CouchDB
        #expect(try matches(#"{"_deleted":{"$exists":false}}"#, #"{"_id":"x"}"#))
    }

    @Test func typeOperator() throws {
        let cases: [(String, String)] = [
            ("null", "null"), ("boolean", "false"), ("number", "1.5"), ("string", #""s""#),
            ("array", "[]"), ("object", "{}"),
        ]
        for (typeName, _) in cases {
            for (otherName, value) in cases {
                #expect(try matches(#"{"v":{"$type":"\#(typeName)"}}"#, #"{"v":\#(value)}"#) == (typeName == otherName))
            }
        }
        #expect(try !matches(#"{"v":{"$type":"integer"}}"#, #"{"v":1}"#))  // unknown names match nothing
    }

    // MARK: Array operators

    @Test func inAndNin() throws {
        #expect(try matches(#"{"c":{"$in":["red","blue"]}}"#, #"{"c":"blue"}"#))
        #expect(try !matches(#"{"c":{"$in":["red","blue"]}}"#, #"{"c":"green"}"#))
        #expect(try matches(#"{"c":{"$in":[1]}}"#, #"{"c":1.0}"#))
        #expect(try !matches(#"{"c":{"$in":[]}}"#, #"{"c":1}"#))
        // An array field matches if any element is in the list.
        #expect(try matches(#"{"c":{"$in":["x","b"]}}"#, #"{"c":["a","b"]}"#))
        #expect(try !matches(#"{"c":{"$in":[["a","b"]]}}"#, #"{"c":["a","b"]}"#))
        #expect(try matches(#"{"c":{"$nin":["red","blue"]}}"#, #"{"c":"green"}"#))
        #expect(try !matches(#"{"c":{"$nin":["red","blue"]}}"#, #"{"c":"red"}"#))
        #expect(try matches(#"{"c":{"$nin":[]}}"#, #"{"c":1}"#))
        #expect(try !matches(#"{"c":{"$nin":["b"]}}"#, #"{"c":["a","b"]}"#))
        #expect(try matches(#"{"c":{"$nin":["z"]}}"#, #"{"c":["a","b"]}"#))
    }

    @Test func sizeOperator() throws {
        #expect(try matches(#"{"t":{"$size":2}}"#, #"{"t":[1,[2,3]]}"#))
        #expect(try !matches(#"{"t":{"$size":3}}"#, #"{"t":[1,2]}"#))
        #expect(try matches(#"{"t":{"$size":0}}"#, #"{"t":[]}"#))
        #expect(try !matches(#"{"t":{"$size":1}}"#, #"{"t":"a"}"#))
        #expect(try !matches(#"{"t":{"$size":1}}"#, #"{"t":{"a":1}}"#))
    }

    @Test func allOperator() throws {
        #expect(try matches(#"{"t":{"$all":["a","b"]}}"#, #"{"t":["b","c","a"]}"#))
        #expect(try !matches(#"{"t":{"$all":["a","b"]}}"#, #"{"t":["a"]}"#))
        #expect(try !matches(#"{"t":{"$all":[]}}"#, #"{"t":["a"]}"#))
        #expect(try !matches(#"{"t":{"$all":["a"]}}"#, #"{"t":"a"}"#))
        // A single array argument also matches that exact array.
        #expect(try matches(#"{"t":{"$all":[["a","b"]]}}"#, #"{"t":["a","b"]}"#))
        #expect(try matches(#"{"t":{"$all":[["a","b"]]}}"#, #"{"t":[["a","b"],"c"]}"#))
        // Membership is exact Erlang equality: 1 and 1.0 differ.
        #expect(try !matches(#"{"t":{"$all":[1]}}"#, #"{"t":[1.0]}"#))
        #expect(try matches(#"{"t":{"$all":[1,{"k":"v"}]}}"#, #"{"t":[{"k":"v"},1]}"#))
    }

    @Test func elemMatchOperator() throws {
        let s = #"{"scores":{"$elemMatch":{"$gte":80,"$lt":85}}}"#
        #expect(try matches(s, #"{"scores":[70,82]}"#))
        #expect(try !matches(s, #"{"scores":[70,90]}"#))
        #expect(try !matches(s, #"{"scores":[]}"#))
        #expect(try !matches(s, #"{"scores":82}"#))
        let items = #"{"items":{"$elemMatch":{"name":"x","qty":{"$gt":2}}}}"#
        #expect(try matches(items, #"{"items":[{"name":"y","qty":5},{"name":"x","qty":3}]}"#))
        // Both conditions must hold for the same element.
        #expect(try !matches(items, #"{"items":[{"name":"x","qty":1},{"name":"y","qty":5}]}"#))
        // Dotted paths inside are relative to the element.
        #expect(try matches(#"{"items":{"$elemMatch":{"a.b":1}}}"#, #"{"items":[{"a":{"b":1}}]}"#))
        #expect(try normalized(s) == #"{"scores":{"$elemMatch":{"$and":[{"":{"$gte":80}},{"":{"$lt":85}}]}}}"#)
    }

    @Test func allMatchOperator() throws {
        let s = #"{"genres":{"$allMatch":{"$eq":"Horror"}}}"#
        #expect(try matches(s, #"{"genres":["Horror","Horror"]}"#))
        #expect(try !matches(s, #"{"genres":["Horror","Comedy"]}"#))
        #expect(try !matches(s, #"{"genres":[]}"#))
        #expect(try !matches(s, #"{"genres":"Horror"}"#))
    }

    @Test func keyMapMatchOperator() throws {
        let s = #"{"cameras":{"$keyMapMatch":{"$eq":"secondary"}}}"#
        #expect(try matches(s, #"{"cameras":{"primary":{"mp":12},"secondary":{"mp":8}}}"#))
        #expect(try !matches(s, #"{"cameras":{"primary":{"mp":12}}}"#))
        #expect(try !matches(s, #"{"cameras":{}}"#))
        #expect(try !matches(s, #"{"cameras":["secondary"]}"#))
    }

    // MARK: Miscellaneous operators

    @Test func modOperator() throws {
        #expect(try matches(#"{"n":{"$mod":[3,1]}}"#, #"{"n":7}"#))
        #expect(try !matches(#"{"n":{"$mod":[3,2]}}"#, #"{"n":7}"#))
        #expect(try !matches(#"{"n":{"$mod":[3,1]}}"#, #"{"n":7.0}"#))  // integers only
        #expect(try !matches(#"{"n":{"$mod":[3,1]}}"#, #"{"n":"7"}"#))
        #expect(try matches(#"{"n":{"$mod":[3,-1]}}"#, #"{"n":-7}"#))  // truncated remainder, like Erlang rem
        #expect(try matches(#"{"n":{"$mod":[-3,1]}}"#, #"{"n":7}"#))
        #expect(try matches(#"{"n":{"$mod":[-1,0]}}"#, #"{"n":-9223372036854775808}"#))  // no overflow trap
    }

    @Test func regexOperator() throws {
        #expect(try matches(#"{"s":{"$regex":"^A"}}"#, #"{"s":"Apple"}"#))
        #expect(try !matches(#"{"s":{"$regex":"^A"}}"#, #"{"s":"apple"}"#))
        #expect(try matches(#"{"s":{"$regex":"(?i)^a"}}"#, #"{"s":"Apple"}"#))
        #expect(try matches(#"{"s":{"$regex":"pl"}}"#, #"{"s":"Apple"}"#))  // unanchored search
        #expect(try matches(#"{"s":{"$regex":"^\\d{3}-\\d{4}$"}}"#, #"{"s":"555-1234"}"#))
        #expect(try !matches(#"{"s":{"$regex":"^\\d{3}-\\d{4}$"}}"#, #"{"s":"555-12345"}"#))
        #expect(try !matches(#"{"s":{"$regex":"1"}}"#, #"{"s":1}"#))  // strings only
        #expect(try matches(#"{"s":{"$regex":"^.$"}}"#, #"{"s":"é"}"#))
        #expect(try matches(#"{"s":{"$regex":"cd$"}}"#, #"{"s":"ab\u0000cd"}"#))  // the whole string, past a NUL
        #expect(try matches(#"{"s":{"$regex":"^(?<word>\\w+) (?P<other>\\w+)$"}}"#, #"{"s":"two words"}"#))
    }

    /// Patterns that make a backtracking matcher take exponential (or quadratic) time answer
    /// at once: RE2 matches in time linear in the string.
    @Test func catastrophicPatternsAnswerWithTheRightResult() throws {
        let thirtyEight = String(repeating: "a", count: 38)
        #expect(try matches(#"{"s":{"$regex":"^(a|aa)+$"}}"#, #"{"s":"\#(thirtyEight)"}"#))
        #expect(try !matches(#"{"s":{"$regex":"^(a|aa)+$"}}"#, #"{"s":"\#(thirtyEight)!"}"#))
        let many = String(repeating: "a", count: 5_000)
        #expect(try !matches(#"{"s":{"$regex":"(a|a)*b"}}"#, #"{"s":"\#(many)"}"#))
        #expect(try matches(#"{"s":{"$regex":"(a|a)*b"}}"#, #"{"s":"\#(many)b"}"#))
        #expect(try !matches(#"{"s":{"$regex":"^(a+)+$"}}"#, #"{"s":"\#(many)!"}"#))
    }

    @Test func groupNamesAreTranslatedOutsideEscapesAndClasses() {
        #expect(MangoRegex.translatingGroupNames("(?<n>x)") == "(?P<n>x)")
        #expect(MangoRegex.translatingGroupNames("(?<=a)b(?<!c)") == "(?<=a)b(?<!c)")
        #expect(MangoRegex.translatingGroupNames(#"\(?<n>"#) == #"\(?<n>"#)
        #expect(MangoRegex.translatingGroupNames("[(?<n>](?<m>y)") == "[(?<n>](?P<m>y)")
        #expect(MangoRegex.translatingGroupNames("[]](?<m>y)") == "[]](?P<m>y)")
        #expect(MangoRegex.translatingGroupNames("é(?<m>y)") == "é(?P<m>y)")
    }

    @Test func beginsWithOperator() throws {
        #expect(try matches(#"{"s":{"$beginsWith":"foo"}}"#, #"{"s":"foobar"}"#))
        #expect(try !matches(#"{"s":{"$beginsWith":"bar"}}"#, #"{"s":"foobar"}"#))
        #expect(try !matches(#"{"s":{"$beginsWith":"1"}}"#, #"{"s":12}"#))
    }

    // MARK: Combination operators

    @Test func andOrNor() throws {
        let doc = #"{"a":1,"b":2}"#
        #expect(try matches(#"{"$and":[{"a":1},{"b":2}]}"#, doc))
        #expect(try !matches(#"{"$and":[{"a":1},{"b":3}]}"#, doc))
        #expect(try matches(#"{"$or":[{"a":5},{"b":2}]}"#, doc))
        #expect(try !matches(#"{"$or":[{"a":5},{"b":5}]}"#, doc))
        #expect(try matches(#"{"$nor":[{"a":5},{"b":5}]}"#, doc))
        #expect(try !matches(#"{"$nor":[{"a":1},{"b":5}]}"#, doc))
        #expect(try matches(#"{"$and":[]}"#, doc))
        #expect(try matches(#"{"$or":[]}"#, doc))
        // Nesting.
        #expect(try matches(#"{"$or":[{"$and":[{"a":1},{"b":2}]},{"c":3}]}"#, doc))
        #expect(try matches(#"{"a":{"$or":[{"$eq":0},{"$gt":0}]}}"#, doc))
        // Combined with plain fields (implicit $and).
        #expect(try matches(#"{"a":1,"$or":[{"b":2},{"c":3}]}"#, doc))
        #expect(try !matches(#"{"a":2,"$or":[{"b":2},{"c":3}]}"#, doc))
    }

    @Test func notIsNormalisedLikeCouchDB() throws {
        // {"$not": {"a": 1}} becomes {"a": {"$ne": 1}}: a document without "a" does not match.
        #expect(try normalized(#"{"$not":{"a":1}}"#) == #"{"a":{"$ne":1}}"#)
        #expect(try matches(#"{"$not":{"a":1}}"#, #"{"a":2}"#))
        #expect(try !matches(#"{"$not":{"a":1}}"#, #"{"a":1}"#))
        #expect(try !matches(#"{"$not":{"a":1}}"#, #"{"b":1}"#))
        // De Morgan.
        #expect(try normalized(#"{"$not":{"$and":[{"a":{"$gt":10}},{"b":{"$lt":5}}]}}"#)
            == #"{"$or":[{"a":{"$lte":10}},{"b":{"$gte":5}}]}"#)
        #expect(try normalized(#"{"$nor":[{"a":1},{"b":{"$in":[1,2]}}]}"#)
            == #"{"$and":[{"a":{"$ne":1}},{"b":{"$nin":[1,2]}}]}"#)
        #expect(try !matches(#"{"$nor":[{"a":1},{"b":2}]}"#, #"{}"#))
        // Double negation cancels.
        #expect(try normalized(#"{"$not":{"$not":{"a":1}}}"#) == #"{"a":{"$eq":1}}"#)
        // $exists flips, so a missing field matches.
        #expect(try matches(#"{"$not":{"a":{"$exists":true}}}"#, #"{}"#))
        // Field-level $not.
        #expect(try normalized(#"{"a":{"$not":{"$gt":5}}}"#) == #"{"a":{"$lte":5}}"#)
        #expect(try matches(#"{"a":{"$not":{"$gt":5}}}"#, #"{"a":3}"#))
        #expect(try !matches(#"{"a":{"$not":{"$gt":5}}}"#, #"{"a":7}"#))
    }

    @Test func notOfNonInvertibleOperators() throws {
        let s = #"{"a":{"$not":{"$regex":"^x"}}}"#
        #expect(try normalized(s) == #"{"a":{"$not":{"$regex":"^x"}}}"#)
        #expect(try matches(s, #"{"a":"yes"}"#))
        #expect(try !matches(s, #"{"a":"xyz"}"#))
        #expect(try !matches(s, #"{}"#))
        #expect(try matches(#"{"t":{"$not":{"$size":1}}}"#, #"{"t":[1,2]}"#))
        #expect(try matches(#"{"t":{"$not":{"$elemMatch":{"$eq":3}}}}"#, #"{"t":[1,2]}"#))
        #expect(try !matches(#"{"t":{"$not":{"$elemMatch":{"$eq":2}}}}"#, #"{"t":[1,2]}"#))
    }

    @Test func textOperatorAtRootIsTrustedLikeCouchDB() throws {
        // Without a text index there is nothing to evaluate: CouchDB's matcher accepts it.
        #expect(try matches(#"{"$text":"anything"}"#, #"{"a":1}"#))
    }

    // MARK: Invalid selectors

    @Test(arguments: [
        ("1", "Selector must be a JSON object"),
        (#""x""#, "Selector must be a JSON object"),
        ("[]", "Selector must be a JSON object"),
        (#"{"$foo":1}"#, "Invalid operator: $foo"),
        (#"{"a":{"$foo":1}}"#, "Invalid operator: $foo"),
        (#"{"a":{"$gt":1,"$bar":2}}"#, "Invalid operator: $bar"),
        (#"{"$where":"1"}"#, "Unsupported operator: $where"),
        (#"{"loc":{"$near":[1,2]}}"#, "Unsupported operator: $near"),
        (#"{"$and":{}}"#, "Bad argument for operator $and: {}"),
        (#"{"$or":1}"#, "Bad argument for operator $or: 1"),
        (#"{"$nor":"x"}"#, #"Bad argument for operator $nor: "x""#),
        (#"{"$not":[1]}"#, "Bad argument for operator $not: [1]"),
        (#"{"a":{"$in":1}}"#, "Bad argument for operator $in: 1"),
        (#"{"a":{"$nin":{}}}"#, "Bad argument for operator $nin: {}"),
        (#"{"a":{"$exists":"yes"}}"#, #"Bad argument for operator $exists: "yes""#),
        (#"{"a":{"$type":1}}"#, "Bad argument for operator $type: 1"),
        (#"{"a":{"$size":-1}}"#, "Bad argument for operator $size: -1"),
        (#"{"a":{"$size":1.5}}"#, "Bad argument for operator $size: 1.5"),
        (#"{"a":{"$mod":[0,1]}}"#, "Bad argument for operator $mod: [0,1]"),
        (#"{"a":{"$mod":[3]}}"#, "Bad argument for operator $mod: [3]"),
        (#"{"a":{"$mod":[2.5,1]}}"#, "Bad argument for operator $mod: [2.5,1]"),
        (#"{"a":{"$regex":"("}}"#, #"Bad argument for operator $regex: "(""#),
        (#"{"a":{"$regex":1}}"#, "Bad argument for operator $regex: 1"),
        // What RE2 does not offer (it would need backtracking) is refused as an invalid pattern.
        (#"{"a":{"$regex":"(a)\\1"}}"#, #"Bad argument for operator $regex: "(a)\\1""#),
        (#"{"a":{"$regex":"a(?=b)"}}"#, #"Bad argument for operator $regex: "a(?=b)""#),
        (#"{"a":{"$regex":"(?<=a)b"}}"#, #"Bad argument for operator $regex: "(?<=a)b""#),
        (#"{"a":{"$regex":"a++"}}"#, #"Bad argument for operator $regex: "a++""#),
        (#"{"a":{"$all":"x"}}"#, #"Bad argument for operator $all: "x""#),
        (#"{"a":{"$elemMatch":1}}"#, "Bad argument for operator $elemMatch: 1"),
        (#"{"a":{"$allMatch":[]}}"#, "Bad argument for operator $allMatch: []"),
        (#"{"a":{"$keyMapMatch":"k"}}"#, #"Bad argument for operator $keyMapMatch: "k""#),
        (#"{"a":{"$beginsWith":1}}"#, "Bad argument for operator $beginsWith: 1"),
        (#"{"$text":[]}"#, "Bad argument for operator $text: []"),
        (#"{"$gt":1}"#, "One or more conditions is missing a field name."),
        (#"{"$not":{"$regex":"x"}}"#, "One or more conditions is missing a field name."),
        (#"{"a..b":1}"#, "Invalid field name: a..b"),
        (#"{"a.":1}"#, "Invalid field name: a."),
        (#"{"a":{"":1}}"#, "Invalid field name: a."),
        (#"{"a":{"$text":"x"}}"#, #"Invalid field normalization on selector: {"$default":{"$text":"x"}}"#),
        (#"{"$not":{"$text":"x"}}"#, #"Bad argument for operator $not: {"$default":{"$text":"x"}}"#),
    ])
    func invalidSelectorsAreRejected(text: String, expected: String) throws {
        #expect(try reason(text) == expected)
    }

    @Test func validSelectorsAreAccepted() throws {
        for text in [
            #"{"a":1}"#, #"{"a":{"$gt":null}}"#, #"{"a":{"$mod":[-2,0]}}"#, #"{"a":{"$size":0}}"#,
            #"{"a":{"$regex":"^(?<name>x+)\\s*$"}}"#, #"{"$and":[]}"#, #"{"a":{}}"#, #"{"a\\.b":1}"#,
        ] {
            #expect(try reason(text) == nil, "\(text)")
        }
    }

    @Test func selectorIsReusableAcrossDocuments() throws {
        let s = try selector(#"{"type":"order","total":{"$gte":100},"status":{"$in":["paid","shipped"]}}"#)
        let docs: [(String, Bool)] = [
            (#"{"_id":"1","type":"order","total":150,"status":"paid"}"#, true),
            (#"{"_id":"2","type":"order","total":50,"status":"paid"}"#, false),
            (#"{"_id":"3","type":"order","total":100,"status":"shipped"}"#, true),
            (#"{"_id":"4","type":"order","total":100,"status":"new"}"#, false),
            (#"{"_id":"5","type":"user","total":500,"status":"paid"}"#, false),
            (#"{"_id":"6","_deleted":true}"#, false),
        ]
        for (text, expected) in docs {
            #expect(s.matches(try JSONValue.parse(text)) == expected, "\(text)")
        }
    }
}
