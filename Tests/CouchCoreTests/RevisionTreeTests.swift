import Testing
@testable import CouchCore

// Cases follow CouchDB's src/couch/test/eunit/couch_key_tree_tests.erl. Its keys "1", "1a", "1aa",
// "1b", "1bb" at depths 1, 2, 3 become the revisions 1-1, 2-1a, 3-1aa, 2-1b, 3-1bb.

// MARK: - Helpers

private func rev(_ text: String) -> RevisionID {
    guard let revision = RevisionID(text) else { fatalError("bad revision literal \(text)") }
    return revision
}

/// A history, newest first: path("3-c", "2-b", "1-a").
private func path(_ texts: String...) -> [RevisionID] {
    texts.map(rev)
}

/// A tree from histories merged in order, each newest revision with a body and not deleted.
private func makeTree(_ histories: [RevisionID]...) -> RevisionTree {
    var result = RevisionTree()
    for history in histories {
        _ = result.merge(history: history, isDeleted: false, hasBody: true)
    }
    return result
}

/// The tree's shape as "child<parent" (or just "root") strings.
private func links(_ tree: RevisionTree) -> Set<String> {
    Set(tree.nodes.map { node in
        node.parent.map { "\(node.revision)<\(tree.nodes[$0].revision)" } ?? node.revision.description
    })
}

private func revs(_ texts: String...) -> [RevisionID] {
    texts.map(rev)
}

/// Sorted, unique, parents before children with a generation one less.
private func checkInvariants(_ tree: RevisionTree, sourceLocation: SourceLocation = #_sourceLocation) {
    for (index, node) in tree.nodes.enumerated() {
        if index > 0 {
            #expect(tree.nodes[index - 1].revision < node.revision, sourceLocation: sourceLocation)
        }
        if let parent = node.parent {
            #expect(parent < index, sourceLocation: sourceLocation)
            #expect(tree.nodes[parent].revision.generation == node.revision.generation - 1,
                    sourceLocation: sourceLocation)
        }
    }
}

/// couch_key_tree_tests' TwoChildSibs: 1 -> (1a, 1b).
private let twoChildSibs = makeTree(path("2-1a", "1-1"), path("2-1b", "1-1"))
/// couch_key_tree_tests' TwoChild: 1 -> 1a -> 1aa.
private let twoChild = makeTree(path("3-1aa", "2-1a", "1-1"))

// MARK: - RevisionID

@Suite struct RevisionTreeRevisionIDTests {
    @Test func parsesValidRevisions() throws {
        let revision = try #require(RevisionID("12-abcdef0123456789abcdef0123456789"))
        #expect(revision.generation == 12)
        #expect(revision.digest == "abcdef0123456789abcdef0123456789")
        #expect(revision.description == "12-abcdef0123456789abcdef0123456789")
        #expect(RevisionID("0-1") == RevisionID(generation: 0, digest: "1"))
        #expect(RevisionID("1-a-b")?.digest == "a-b")                  // split at the first '-'
        #expect(RevisionID("01-a") == RevisionID(generation: 1, digest: "a"))
        #expect(RevisionID("\(Int.max)-x")?.generation == Int.max)
        #expect(RevisionID("3-é")?.digest == "é")
    }

    @Test func upperCaseHexDigestsAreLowered() {
        #expect(RevisionID("1-ABCDEF0123456789ABCDEF0123456789")?.digest == "abcdef0123456789abcdef0123456789")
        #expect(RevisionID("1-ABC")?.digest == "ABC")                   // not 32 hex digits: as sent
        #expect(RevisionID("1-ABCDEF0123456789ABCDEF012345678G")?.digest == "ABCDEF0123456789ABCDEF012345678G")
    }

    @Test func writesTheSameJSONStringAsItsDescription() {
        for text in ["12-abcdef0123456789abcdef0123456789", "0-1", "9-a", "10-b", "1234567890-c", "\(Int.max)-d", "1-", "3-é", #"2-a"b"#, #"2-a\b"#, "1-a\u{7f}"] {
            let revision = RevisionID(generation: Int(text.prefix { $0 != "-" })!,
                                      digest: String(text.drop { $0 != "-" }.dropFirst()))
            var written: [UInt8] = []
            revision.appendJSON(to: &written)
            var expected: [UInt8] = []
            JSONWriter.appendString(revision.description, to: &expected)
            #expect(written == expected, "\(text.debugDescription)")
        }
    }

    @Test func rejectsInvalidRevisions() {
        for text in ["", "-", "1", "-abc", "+1-abc", "-1-abc", " 1-abc", "1 -abc", "a-abc", "1.0-abc",
                     "1-ab c", "1-abc\n", "1-\tabc", "9223372036854775808-abc", "99999999999999999999-abc"] {
            #expect(RevisionID(text) == nil, "\(text.debugDescription) should be rejected")
        }
    }

    @Test func ordersByGenerationThenDigestBytes() {
        #expect(rev("2-z") < rev("10-a"))
        #expect(rev("2-a") < rev("2-b"))
        #expect(rev("2-B") < rev("2-a"))                                // byte order: 'B' 0x42 < 'a' 0x61
        #expect(rev("2-ab") < rev("2-abc"))
        #expect(rev("2-z") < rev("2-é"))                                // é is 0xC3 0xA9
        #expect(!(rev("2-a") < rev("2-a")))
        #expect([rev("3-a"), rev("1-b"), rev("2-c"), rev("2-b")].sorted() == revs("1-b", "2-b", "2-c", "3-a"))
    }

    @Test func equalityAndHashingUseBytes() {
        let composed = RevisionID(generation: 1, digest: "\u{E9}")
        let decomposed = RevisionID(generation: 1, digest: "e\u{301}")
        #expect(composed != decomposed)                                 // Swift's String == would say equal
        #expect(Set([composed, decomposed]).count == 2)
        #expect(rev("1-abc") == RevisionID(generation: 1, digest: "abc"))
        #expect(Set([rev("1-abc"), RevisionID(generation: 1, digest: "abc")]).count == 1)
    }

    /// An MD5 digest is held as its 16 bytes: however it is built, it is the same revision,
    /// with the same text, hash and bytes.
    @Test func anMD5DigestIsTheSameRevisionHoweverBuilt() throws {
        let bytes: [UInt8] = [0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67, 0x89, 0x00, 0xff, 0x10, 0x20, 0x30, 0x40, 0x50, 0x6f]
        let hex = "abcdef012345678900ff10203040506f"
        let forms = [RevisionID(generation: 7, md5: bytes), try #require(RevisionID("7-\(hex)")),
                     try #require(RevisionID("7-\(hex.uppercased())")), RevisionID(generation: 7, digest: hex)]
        for form in forms {
            #expect(form == forms[0])
            #expect(form.digest == hex)
            #expect(form.description == "7-\(hex)")
            #expect(form.md5Bytes == bytes)
            #expect(form.digestBinary == bytes)
        }
        #expect(Set(forms).count == 1)
        // Ordered as their text: digests sharing their first half, or differing only there.
        let ordered = ["1-00000000000000000000000000000001", "1-00000000000000000000000000000002",
                       "1-0000000000000000ffffffffffffffff", "1-00000000000000010000000000000000",
                       "1-f0000000000000000000000000000000", "2-00000000000000000000000000000000"]
        #expect(ordered.compactMap(RevisionID.init).shuffled().sorted().map(\.description) == ordered)
        // Built from unvalidated parts, upper-case digits are kept as written: another revision.
        let upper = RevisionID(generation: 7, digest: hex.uppercased())
        #expect(upper != forms[0] && upper.digest == hex.uppercased() && upper.md5Bytes == nil)
    }

    /// Ordering, equality and hashing agree with CouchDB's order on the digests' text (hex against
    /// hex as text, hex against other digests by the bytes the hex spells), whatever the form held.
    @Test func orderAndEqualityFollowTheTextWhateverTheForm() {
        var generator = SystemRandomNumberGenerator()
        let kinds: [() -> String] = [
            { String((0..<32).map { _ in "0123456789abcdef".randomElement(using: &generator)! }) },
            { String((0..<32).map { _ in "0123456789ABCDEF".randomElement(using: &generator)! }) },
            { String((0..<32).map { _ in "0123456789abcdefg".randomElement(using: &generator)! }) },
            { String((0..<Int.random(in: 1...4, using: &generator)).map { _ in "0af\u{e9}".randomElement(using: &generator)! }) },
        ]
        var samples: [(RevisionID, String)] = []
        for _ in 0..<300 {
            let text = kinds.randomElement(using: &generator)!()
            let generation = Int.random(in: 1...2, using: &generator)
            samples.append((RevisionID(generation: generation, digest: text), text))
            samples.append((RevisionID("\(generation)-\(text)") ?? RevisionID(generation: generation, digest: text),
                            Self.isHex32(text) ? text.lowercased() : text))
        }
        for (a, aText) in samples.prefix(120) {
            for (b, bText) in samples.prefix(120) {
                let expected = Self.referenceOrder(a.generation, aText, b.generation, bText)
                #expect((a < b) == (expected < 0), "\(a) < \(b)")
                #expect((a == b) == (expected == 0), "\(a) == \(b)")
                if a == b { #expect(a.hashValue == b.hashValue) }
            }
        }
    }

    /// `_revisions` is written as its JSON value serialises, whatever the digests' forms, and
    /// read with hex digests in either case held as a parsed revision holds them.
    @Test func aHistoryIsWrittenAsItsJSONAndReadNormalised() throws {
        let history = try RevisionHistory(json: JSONValue.parse(
            #"{"start":5,"ids":["ABCDEF0123456789ABCDEF0123456789","x\"y","\u00e9","0123456789abcdef0123456789abcdef"]}"#))
        #expect(history.start == 5)
        #expect(history.ids == ["abcdef0123456789abcdef0123456789", "x\"y", "\u{e9}", "0123456789abcdef0123456789abcdef"])
        #expect(history.revisions[0] == RevisionID("5-abcdef0123456789abcdef0123456789"))
        #expect(history.revisions[3].description == "2-0123456789abcdef0123456789abcdef")
        var written: [UInt8] = []
        history.write(to: &written)
        #expect(written == history.json.serialized())
        #expect(try JSONValue.parse(written) == history.json)
    }

    static func isHex32(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { Base16.value($0) != nil }
    }

    /// CouchDB's order on `N-digest`, on the digests' text: the order before digests were held
    /// as bytes.
    static func referenceOrder(_ g1: Int, _ d1: String, _ g2: Int, _ d2: String) -> Int {
        if g1 != g2 { return g1 < g2 ? -1 : 1 }
        func bytes(_ a: [UInt8], _ b: [UInt8]) -> Int {
            for (x, y) in zip(a, b) where x != y { return x < y ? -1 : 1 }
            return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
        }
        let t1 = Array(d1.utf8), t2 = Array(d2.utf8)
        if isHex32(d1) == isHex32(d2) { return bytes(t1, t2) }
        let b1 = isHex32(d1) ? Base16.decode(t1)! : t1, b2 = isHex32(d2) ? Base16.decode(t2)! : t2
        let binary = bytes(b1, b2)
        return binary != 0 ? binary : bytes(t1, t2)
    }
}

// MARK: - Merging (couch_key_tree_tests "Key tree merge")

@Suite struct RevisionTreeMergeTests {
    @Test func mergeIntoEmptyTree() {
        var tree = RevisionTree()
        #expect(tree.isEmpty)
        #expect(tree.winner == nil)
        #expect(tree.merge(history: path("1-1"), isDeleted: false, hasBody: true) == .newLeaf)
        #expect(links(tree) == ["1-1"])
        #expect(tree.winner == .init(revision: rev("1-1"), isDeleted: false))
        #expect(tree.node(rev("1-1")) == .init(revision: rev("1-1"), parent: nil, isDeleted: false, hasBody: true))
    }

    @Test func mergeIntoEmptyTreeWithAncestors() {
        var tree = RevisionTree()
        #expect(tree.merge(history: path("3-c", "2-b", "1-a"), isDeleted: false, hasBody: true) == .newLeaf)
        #expect(links(tree) == ["1-a", "2-b<1-a", "3-c<2-b"])
        #expect(tree.node(rev("2-b"))?.hasBody == false)
        #expect(tree.node(rev("1-a"))?.hasBody == false)
        #expect(tree.node(rev("3-c"))?.hasBody == true)
        checkInvariants(tree)
    }

    @Test func mergeReflexive() {
        var tree = makeTree(path("1-1"))
        let before = tree
        #expect(tree.merge(history: path("1-1"), isDeleted: false, hasBody: true) == .alreadyKnown)
        #expect(tree == before)
    }

    @Test func mergePrefixOfATreeWithTree() {
        var tree = makeTree(path("1-1"), path("1-2"))
        let before = tree
        #expect(tree.merge(history: path("1-1"), isDeleted: false, hasBody: true) == .alreadyKnown)
        #expect(tree == before)
    }

    @Test func conflictOnMergeWithUnrelatedBranch() {
        var tree = makeTree(path("1-1"), path("1-2"))
        #expect(tree.merge(history: path("1-3"), isDeleted: false, hasBody: true) == .newBranch)
        #expect(links(tree) == ["1-1", "1-2", "1-3"])
        #expect(tree.winner?.revision == rev("1-3"))
        #expect(tree.conflicts == revs("1-2", "1-1"))
    }

    @Test func mergeReflexiveForChildNodes() {
        var tree = twoChild
        #expect(tree.merge(history: path("3-1aa", "2-1a", "1-1"), isDeleted: false, hasBody: true) == .alreadyKnown)
        #expect(tree == twoChild)
    }

    @Test func mergeTreeToItself() {
        var tree = twoChildSibs
        for leaf in tree.leaves {
            #expect(tree.merge(history: tree.history(of: leaf.revision), isDeleted: false, hasBody: true) == .alreadyKnown)
        }
        #expect(tree == twoChildSibs)
    }

    @Test func mergeTreeOfOddLength() {
        var tree = twoChildSibs
        #expect(tree.merge(history: path("3-1aa", "2-1a", "1-1"), isDeleted: false, hasBody: true) == .newLeaf)
        #expect(links(tree) == ["1-1", "2-1a<1-1", "2-1b<1-1", "3-1aa<2-1a"])
        checkInvariants(tree)
    }

    @Test func mergeTreeWithStem() {
        var tree = twoChildSibs
        #expect(tree.merge(history: path("2-1a"), isDeleted: false, hasBody: true) == .alreadyKnown)
        #expect(tree == twoChildSibs)
    }

    @Test func mergeWithStemAtDeeperLevel() {
        var tree = makeTree(path("2-1a", "1-1"), path("3-1bb", "2-1b", "1-1"))
        let before = tree
        #expect(tree.merge(history: path("3-1bb"), isDeleted: false, hasBody: true) == .alreadyKnown)
        #expect(tree == before)
    }

    @Test func mergeWithStemAtDeeperLevelWithDeeperPaths() {
        var tree = makeTree(path("2-1a"), path("3-1bb", "2-1b"))
        let before = tree
        #expect(links(tree) == ["2-1a", "2-1b", "3-1bb<2-1b"])
        #expect(tree.merge(history: path("3-1bb"), isDeleted: false, hasBody: true) == .alreadyKnown)
        #expect(tree == before)
    }

    @Test func mergeSingleTreeWithDeeperStem() {
        var tree = twoChild
        #expect(tree.merge(history: path("3-1aa"), isDeleted: false, hasBody: true) == .alreadyKnown)
        #expect(tree == twoChild)
    }

    @Test func mergeTreeWithLargeStem() {
        var tree = twoChild
        #expect(tree.merge(history: path("3-1aa", "2-1a"), isDeleted: false, hasBody: true) == .alreadyKnown)
        #expect(tree == twoChild)
    }

    @Test func mergeStems() {
        var tree = makeTree(path("3-1aa", "2-1a"))
        let before = tree
        #expect(tree.merge(history: path("3-1aa"), isDeleted: false, hasBody: true) == .alreadyKnown)
        #expect(tree == before)
    }

    @Test func createConflictsOnMerge() {
        var tree = makeTree(path("2-1a", "1-1"))
        #expect(tree.merge(history: path("3-1aa"), isDeleted: false, hasBody: true) == .newBranch)
        #expect(links(tree) == ["1-1", "2-1a<1-1", "3-1aa"])
        #expect(tree.winner?.revision == rev("3-1aa"))
        #expect(tree.conflicts == revs("2-1a"))
    }

    @Test func createNoConflictsOnMerge() {
        // [OneChild, Stemmed] + TwoChild: CouchDB answers new_leaf and ends with the single tree TwoChild.
        var tree = makeTree(path("2-1a", "1-1"), path("3-1aa"))
        #expect(tree.merge(history: path("3-1aa", "2-1a", "1-1"), isDeleted: false, hasBody: true) == .newLeaf)
        #expect(links(tree) == links(twoChild))
        #expect(tree.conflicts.isEmpty)
        checkInvariants(tree)
        // Once joined, the same history is a no-op.
        let joined = tree
        #expect(tree.merge(history: path("3-1aa", "2-1a", "1-1"), isDeleted: false, hasBody: true) == .alreadyKnown)
        #expect(tree == joined)
    }

    @Test func ignoreConflictingBranch() {
        // COUCHDB-902: foo -> (foo2, foo3), then foo4 on foo3.
        var tree = makeTree(path("2-foo2", "1-foo"), path("2-foo3", "1-foo"))
        #expect(tree.merge(history: path("3-foo4", "2-foo3", "1-foo"), isDeleted: false, hasBody: true) == .newLeaf)
        #expect(links(tree) == ["1-foo", "2-foo2<1-foo", "2-foo3<1-foo", "3-foo4<2-foo3"])
        #expect(tree.winner?.revision == rev("3-foo4"))
        #expect(tree.conflicts == revs("2-foo2"))
    }

    // MARK: Beyond the Erlang cases

    @Test func extendLeaf() {
        var tree = makeTree(path("2-b", "1-a"))
        #expect(tree.merge(history: path("3-c", "2-b", "1-a"), isDeleted: false, hasBody: true) == .newLeaf)
        #expect(tree.merge(history: path("5-e", "4-d", "3-c"), isDeleted: false, hasBody: true) == .newLeaf)
        #expect(links(tree) == ["1-a", "2-b<1-a", "3-c<2-b", "4-d<3-c", "5-e<4-d"])
        #expect(tree.node(rev("4-d"))?.hasBody == false)
        #expect(tree.leaves == [.init(revision: rev("5-e"), isDeleted: false)])
    }

    @Test func conflictingBranchOnInternalNode() {
        var tree = makeTree(path("3-c", "2-b", "1-a"))
        #expect(tree.merge(history: path("2-x", "1-a"), isDeleted: false, hasBody: true) == .newBranch)
        #expect(tree.merge(history: path("4-y", "3-y", "2-b", "1-a"), isDeleted: false, hasBody: true) == .newBranch)
        #expect(links(tree) == ["1-a", "2-b<1-a", "2-x<1-a", "3-c<2-b", "3-y<2-b", "4-y<3-y"])
        #expect(tree.winner?.revision == rev("4-y"))
        #expect(tree.conflicts == revs("3-c", "2-x"))
        checkInvariants(tree)
    }

    @Test func disjointHistoriesBecomeRoots() {
        var tree = makeTree(path("2-b", "1-a"))
        #expect(tree.merge(history: path("2-y", "1-x"), isDeleted: false, hasBody: true) == .newBranch)
        #expect(links(tree) == ["1-a", "2-b<1-a", "1-x", "2-y<1-x"])
        #expect(tree.winner?.revision == rev("2-y"))
        #expect(tree.conflicts == revs("2-b"))
        // An older disjoint revision sorts before the existing nodes: indexes are remapped.
        #expect(tree.merge(history: path("1-0"), isDeleted: false, hasBody: true) == .newBranch)
        checkInvariants(tree)
        #expect(tree.history(of: rev("2-b")) == revs("2-b", "1-a"))
        #expect(tree.history(of: rev("2-y")) == revs("2-y", "1-x"))
    }

    @Test func overlappingHistoryReattachesStemmedRoot() {
        // The tree was stemmed to 3-c -> 4-d; a peer sends 5-e with its full history.
        var tree = makeTree(path("4-d", "3-c"))
        #expect(tree.merge(history: path("5-e", "4-d", "3-c", "2-b", "1-a"), isDeleted: false, hasBody: true) == .newLeaf)
        #expect(links(tree) == ["1-a", "2-b<1-a", "3-c<2-b", "4-d<3-c", "5-e<4-d"])
        #expect(tree.history(of: rev("5-e")) == revs("5-e", "4-d", "3-c", "2-b", "1-a"))
        checkInvariants(tree)
    }

    @Test func longerHistoryOfAKnownRevisionStillGrafts() {
        // CouchDB grows the shorter path (merge_at, Pos > 0) and writes the changed tree; we report .newLeaf.
        var tree = makeTree(path("3-c", "2-b"))
        #expect(tree.merge(history: path("3-c", "2-b", "1-a"), isDeleted: false, hasBody: true) == .newLeaf)
        #expect(links(tree) == ["1-a", "2-b<1-a", "3-c<2-b"])
        #expect(tree.merge(history: path("3-c", "2-b", "1-a"), isDeleted: false, hasBody: true) == .alreadyKnown)
    }

    @Test func longerHistoryIntoStemmedTreeWithBranches() {
        var tree = makeTree(path("4-d", "3-c"), path("4-x", "3-c"))
        #expect(tree.merge(history: path("5-e", "4-d", "3-c", "2-b", "1-a"), isDeleted: false, hasBody: true) == .newLeaf)
        #expect(links(tree) == ["1-a", "2-b<1-a", "3-c<2-b", "4-d<3-c", "4-x<3-c", "5-e<4-d"])
        #expect(tree.history(of: rev("4-x")) == revs("4-x", "3-c", "2-b", "1-a"))
        checkInvariants(tree)
    }

    @Test func missingBodyIsFilledIn() {
        var tree = makeTree(path("3-c", "2-b", "1-a"))
        #expect(tree.status(of: rev("2-b")) == .missing)
        #expect(tree.merge(history: path("2-b", "1-a"), isDeleted: true, hasBody: true) == .newLeaf)
        #expect(tree.node(rev("2-b")) == .init(revision: rev("2-b"), parent: 0, isDeleted: true, hasBody: true))
        #expect(tree.status(of: rev("2-b")) == .deleted)
        let filled = tree
        // A stored body wins over a later one (value_pref keeps the existing value).
        #expect(tree.merge(history: path("2-b", "1-a"), isDeleted: false, hasBody: true) == .alreadyKnown)
        #expect(tree == filled)
    }

    @Test func historyDisagreeingWithTreeStopsThere() {
        var tree = makeTree(path("2-b", "1-a"))
        #expect(tree.merge(history: path("3-c", "2-b", "1-x"), isDeleted: false, hasBody: true) == .newLeaf)
        #expect(links(tree) == ["1-a", "2-b<1-a", "3-c<2-b"])
        #expect(!tree.contains(rev("1-x")))
    }

    @Test func historyIsCutAtFirstGenerationGap() {
        var tree = makeTree(path("1-a"))
        #expect(tree.merge(history: path("3-c", "1-a"), isDeleted: false, hasBody: true) == .newBranch)
        #expect(links(tree) == ["1-a", "3-c"])
        var empty = RevisionTree()
        #expect(empty.merge(history: [], isDeleted: false, hasBody: true) == .alreadyKnown)
        #expect(empty.isEmpty)
    }

    @Test func deletedLeafMerge() {
        var tree = makeTree(path("1-a"))
        #expect(tree.merge(history: path("2-d", "1-a"), isDeleted: true, hasBody: true) == .newLeaf)
        #expect(tree.winner == .init(revision: rev("2-d"), isDeleted: true))
        #expect(tree.status(of: rev("2-d")) == .deleted)
        // Recreating on top of the tombstone.
        #expect(tree.merge(history: path("3-r", "2-d", "1-a"), isDeleted: false, hasBody: true) == .newLeaf)
        #expect(tree.winner == .init(revision: rev("3-r"), isDeleted: false))
        #expect(tree.node(rev("2-d"))?.isDeleted == true)
    }
}

// MARK: - Leaves, winner, conflicts

@Suite struct RevisionTreeLeafTests {
    @Test func deletedLeafNeverBeatsLiveLeaf() {
        var tree = makeTree(path("2-x", "1-a"))
        _ = tree.merge(history: path("5-e", "4-d", "3-c", "2-b", "1-a"), isDeleted: true, hasBody: true)
        #expect(tree.winner == .init(revision: rev("2-x"), isDeleted: false))
        #expect(tree.conflicts.isEmpty)
        #expect(tree.deletedConflicts == revs("5-e"))
        #expect(tree.leaves.map(\.revision) == revs("2-x", "5-e"))
    }

    @Test func equalGenerationTiebreakIsGreaterDigest() {
        let tree = makeTree(path("2-b", "1-a"), path("2-x", "1-a"), path("2-B", "1-a"))
        #expect(tree.winner?.revision == rev("2-x"))
        #expect(tree.conflicts == revs("2-b", "2-B"))
    }

    @Test func higherGenerationWinsOverGreaterDigest() {
        let tree = makeTree(path("3-a", "2-a", "1-a"), path("2-z", "1-a"))
        #expect(tree.winner?.revision == rev("3-a"))
        #expect(tree.conflicts == revs("2-z"))
    }

    @Test func allLeavesDeleted() {
        var tree = RevisionTree()
        _ = tree.merge(history: path("2-b", "1-a"), isDeleted: true, hasBody: true)
        _ = tree.merge(history: path("3-c", "2-c", "1-a"), isDeleted: true, hasBody: true)
        _ = tree.merge(history: path("2-z", "1-a"), isDeleted: true, hasBody: true)
        #expect(tree.winner == .init(revision: rev("3-c"), isDeleted: true))
        #expect(tree.conflicts.isEmpty)
        #expect(tree.deletedConflicts == revs("2-z", "2-b"))
    }

    @Test func leavesConflictsAndDeletedConflictsOrder() {
        var tree = makeTree(path("3-a", "2-a", "1-r"), path("3-c", "2-c", "1-r"), path("2-z", "1-r"))
        _ = tree.merge(history: path("4-d", "3-d", "2-d", "1-r"), isDeleted: true, hasBody: true)
        _ = tree.merge(history: path("2-y", "1-r"), isDeleted: true, hasBody: true)
        #expect(tree.leaves.map(\.revision) == revs("3-c", "3-a", "2-z", "4-d", "2-y"))
        #expect(tree.leaves.map(\.isDeleted) == [false, false, false, true, true])
        #expect(tree.winner?.revision == rev("3-c"))
        #expect(tree.conflicts == revs("3-a", "2-z"))
        #expect(tree.deletedConflicts == revs("4-d", "2-y"))
        #expect(tree.isLeaf(rev("2-z")))
        #expect(!tree.isLeaf(rev("1-r")))
        #expect(!tree.isLeaf(rev("9-unknown")))
    }

    @Test func historyOfRevision() {
        let tree = twoChildSibs
        #expect(tree.history(of: rev("2-1b")) == revs("2-1b", "1-1"))
        #expect(tree.history(of: rev("1-1")) == revs("1-1"))
        #expect(tree.history(of: rev("3-nope")).isEmpty)
        #expect(tree.history(of: rev("3-1aa")).isEmpty)
    }

    @Test func leavesDescendingFromRevision() {
        // couch_key_tree get_key_leafs: an inner node gives its leaves, a leaf itself.
        var tree = makeTree(path("3-c", "2-b", "1-a"), path("3-x", "2-b", "1-a"), path("2-y", "1-a"))
        _ = tree.merge(history: path("4-d", "3-c"), isDeleted: true, hasBody: true)
        #expect(tree.leaves(descendingFrom: rev("1-a")).map(\.revision) == revs("3-x", "2-y", "4-d"))
        #expect(tree.leaves(descendingFrom: rev("2-b")).map(\.revision) == revs("3-x", "4-d"))
        #expect(tree.leaves(descendingFrom: rev("3-c")) == [.init(revision: rev("4-d"), isDeleted: true)])
        #expect(tree.leaves(descendingFrom: rev("2-y")) == [.init(revision: rev("2-y"), isDeleted: false)])
        #expect(tree.leaves(descendingFrom: rev("1-zz")).isEmpty)
    }

    @Test func missingRevisions() {
        // couch_key_tree_tests should_find_missing_leaves, with generations instead of depths.
        let sibs = twoChildSibs
        #expect(sibs.missing(revs("1-1", "2-1a")).isEmpty)
        #expect(sibs.missing(revs("1-1", "1-10", "2-1a", "100-x")) == revs("1-10", "100-x"))
        let stemmed1 = makeTree(path("3-1aa", "2-1a"))
        #expect(stemmed1.missing(revs("1-1", "2-1a", "100-x")) == revs("1-1", "100-x"))
        let stemmed2 = makeTree(path("3-1aa"))
        #expect(stemmed2.missing(revs("1-1", "2-1a", "100-x")) == revs("1-1", "2-1a", "100-x"))
        // Input order kept, duplicates removed.
        #expect(sibs.missing(revs("9-z", "1-1", "3-q", "9-z", "3-q")) == revs("9-z", "3-q"))
    }

    @Test func possibleAncestors() {
        var tree = makeTree(path("4-d", "3-c", "2-b", "1-a"), path("3-q", "2-q", "1-a"))
        _ = tree.merge(history: path("2-x", "1-a"), isDeleted: true, hasBody: true)
        #expect(tree.possibleAncestors(for: revs("3-m", "5-n")) == revs("4-d", "3-q", "2-x"))
        #expect(tree.possibleAncestors(for: revs("4-m")) == revs("3-q", "2-x"))
        #expect(tree.possibleAncestors(for: revs("3-m")) == revs("2-x"))
        #expect(tree.possibleAncestors(for: revs("2-m")).isEmpty)
        #expect(tree.possibleAncestors(for: []).isEmpty)
    }

    @Test func revisionStatus() {
        var tree = makeTree(path("3-c", "2-b", "1-a"))
        _ = tree.merge(history: path("4-d", "3-c"), isDeleted: true, hasBody: true)
        #expect(tree.status(of: rev("4-d")) == .deleted)
        #expect(tree.status(of: rev("3-c")) == .available)
        #expect(tree.status(of: rev("2-b")) == .missing)
        #expect(tree.status(of: rev("1-a")) == .missing)
        #expect(tree.status(of: rev("5-e")) == nil)
        tree.setHasBody(false, for: rev("3-c"))                       // compaction
        #expect(tree.status(of: rev("3-c")) == .missing)
        tree.setHasBody(true, for: rev("2-b"))
        #expect(tree.status(of: rev("2-b")) == .available)
        let before = tree
        tree.setHasBody(true, for: rev("7-unknown"))
        #expect(tree == before)
        #expect(RevisionTree.RevisionStatus.available.rawValue == "available")
    }
}

// MARK: - Stemming (couch_key_tree_tests "Stemming")

@Suite struct RevisionTreeStemTests {
    @Test func noEffectForStemmingMoreLevelsThanExist() {
        var tree = twoChild
        #expect(tree.stem(limit: 3).isEmpty)
        #expect(tree.stem(limit: 1000).isEmpty)
        #expect(tree == twoChild)
    }

    @Test func returnOneDeepestNode() {
        var tree = twoChild
        #expect(tree.stem(limit: 1) == revs("1-1", "2-1a"))
        #expect(links(tree) == ["3-1aa"])
        #expect(tree.node(rev("3-1aa"))?.hasBody == true)
    }

    @Test func returnTwoDeepestNodes() {
        var tree = twoChild
        #expect(tree.stem(limit: 2) == revs("1-1"))
        #expect(links(tree) == ["2-1a", "3-1aa<2-1a"])
        checkInvariants(tree)
    }

    @Test func branchedTreeLimitThree() {
        // 1-a -> 2-b -> 3-c -> 4-d, and 2-b -> 3-x.
        var tree = makeTree(path("4-d", "3-c", "2-b", "1-a"), path("3-x", "2-b", "1-a"))
        #expect(tree.stem(limit: 3) == revs("1-a"))
        #expect(links(tree) == ["2-b", "3-c<2-b", "3-x<2-b", "4-d<3-c"])
    }

    @Test func branchedTreeLimitTwo() {
        // CouchDB would keep 2-b for 3-x's sake, leaving 2-b -> 3-c -> 4-d three revisions long.
        var tree = makeTree(path("4-d", "3-c", "2-b", "1-a"), path("3-x", "2-b", "1-a"))
        let leaves = tree.leaves
        #expect(tree.stem(limit: 2) == revs("1-a", "2-b"))
        #expect(links(tree) == ["3-c", "4-d<3-c", "3-x"])
        #expect(tree.leaves == leaves)
        #expect(tree.conflicts == revs("3-x"))
    }

    @Test func branchedTreeLimitOne() {
        var tree = makeTree(path("4-d", "3-c", "2-b", "1-a"), path("3-x", "2-b", "1-a"), path("2-y", "1-a"))
        #expect(tree.stem(limit: 1) == revs("1-a", "2-b", "3-c"))
        #expect(links(tree) == ["2-y", "3-x", "4-d"])
        checkInvariants(tree)
    }

    @Test func shortBranchKeepsItsAncestorsWhenPathsFit() {
        // A long main line and a conflict near its root: the limit cuts the main line only.
        var tree = makeTree(path("6-f", "5-e", "4-d", "3-c", "2-b", "1-a"), path("2-x", "1-a"))
        #expect(tree.stem(limit: 3) == revs("2-b", "3-c"))
        #expect(links(tree) == ["1-a", "2-x<1-a", "4-d", "5-e<4-d", "6-f<5-e"])
        var wide = makeTree(path("6-f", "5-e", "4-d", "3-c", "2-b", "1-a"), path("2-x", "1-a"))
        #expect(wide.stem(limit: 5) == revs("1-a"))
        #expect(links(wide) == ["2-b", "3-c<2-b", "4-d<3-c", "5-e<4-d", "6-f<5-e", "2-x"])
    }

    @Test func limitBelowOneKeepsLeaves() {
        var tree = twoChildSibs
        #expect(tree.stem(limit: 0) == revs("1-1"))
        #expect(links(tree) == ["2-1a", "2-1b"])
    }

    @Test func stemThenLongerHistoryReattaches() {
        var tree = makeTree(path("5-e", "4-d", "3-c", "2-b", "1-a"))
        #expect(tree.stem(limit: 2) == revs("1-a", "2-b", "3-c"))
        #expect(tree.merge(history: path("6-f", "5-e", "4-d", "3-c"), isDeleted: false, hasBody: true) == .newLeaf)
        #expect(links(tree) == ["3-c", "4-d<3-c", "5-e<4-d", "6-f<5-e"])
        #expect(tree.stem(limit: 2) == revs("3-c", "4-d"))
        #expect(links(tree) == ["5-e", "6-f<5-e"])
    }
}

// MARK: - Encoding

@Suite struct RevisionTreeEncodingTests {
    private func sample() -> RevisionTree {
        var tree = makeTree(path("3-1aa", "2-1a", "1-1"), path("2-1b", "1-1"))
        _ = tree.merge(history: path("4-0123456789abcdef0123456789abcdef", "3-1aa"), isDeleted: true, hasBody: true)
        _ = tree.merge(history: path("7-ÜñÎçødé", "6-x-y"), isDeleted: false, hasBody: true)
        _ = tree.merge(history: path("\(Int.max)-big", "\(Int.max - 1)-0123456789ABCDEF0123456789ABCDEF"),
                       isDeleted: false, hasBody: false)
        return tree
    }

    @Test func roundTrip() throws {
        for tree in [RevisionTree(), twoChild, twoChildSibs, sample()] {
            let decoded = try RevisionTree(encoded: tree.encoded())
            #expect(decoded == tree)
            #expect(decoded.encoded() == tree.encoded())
        }
    }

    @Test func hexDigestsAreCompact() {
        let tree = makeTree(path("2-0123456789abcdef0123456789abcdef", "1-fedcba9876543210fedcba9876543210"))
        // version, count, then per node: flags, generation delta, [parent distance], 16 digest bytes.
        #expect(tree.encoded().count == 2 + (1 + 1 + 16) + (1 + 1 + 1 + 16))
    }

    @Test func garbageThrows() {
        let valid = sample().encoded()
        var cases: [[UInt8]] = [
            [],                                   // nothing
            [2, 0],                               // unknown version
            [1],                                  // no count
            [1, 0, 0],                            // trailing byte after an empty tree
            [1, 1, 0x10, 1, 1, 0x61],             // unknown flag
            [1, 1, 0x04, 1, 1, 1, 0x61],          // parent distance on the first node
            [1, 2, 0, 1, 1, 0x61, 0x04, 1, 0, 1, 0x62],            // parent distance 0
            [1, 2, 0, 1, 1, 0x61, 0x04, 1, 2, 1, 0x62],            // parent distance past the start
            [1, 2, 0, 1, 1, 0x62, 0, 0, 1, 0x61],                  // 1-b then 1-a: not ascending
            [1, 2, 0, 1, 1, 0x61, 0, 0, 1, 0x61],                  // duplicate revision
            [1, 2, 0, 1, 1, 0x61, 0x04, 2, 1, 1, 0x62],            // parent generation 1 under generation 3
            [1, 1, 0, 1, 2, 0xC3, 0x28],                           // invalid UTF-8
            [1, 1, 0, 1, 5, 0x61],                                 // digest longer than the input
            [1, 1, 0x08, 1] + [UInt8](repeating: 0xAB, count: 15), // hex digest cut short
            [1, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F],                      // node count far beyond the input
            [1, 1, 0] + [UInt8](repeating: 0xFF, count: 10) + [0x01, 1, 0x61], // generation varint overflow
            [1, 1, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 1, 0x61], // > Int.max
            [1, 2, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F, 1, 0x61,
             0, 1, 1, 0x61],                                       // generation addition overflow
            valid + [0],                                           // trailing byte
        ]
        for length in 0..<valid.count { cases.append(Array(valid[0..<length])) }   // every truncation
        for bytes in cases {
            #expect(throws: RevisionTreeDecodingError.self, "\(bytes)") { try RevisionTree(encoded: bytes) }
        }
    }

    @Test func randomBytesNeverCrash() {
        var random = XorShift(seed: 0xDEC0DE)
        let valid = sample().encoded()
        for round in 0..<3000 {
            var bytes: [UInt8]
            if round % 2 == 0 {
                bytes = (0..<random.int(64)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                if !bytes.isEmpty && round % 4 == 0 { bytes[0] = 1 }
            } else {
                bytes = valid
                for _ in 0...random.int(3) {
                    bytes[random.int(bytes.count)] = UInt8(truncatingIfNeeded: random.next())
                }
            }
            if let tree = try? RevisionTree(encoded: bytes) {
                checkInvariants(tree)
                #expect((try? RevisionTree(encoded: tree.encoded())) == tree)
                _ = tree.winner
                _ = tree.leaves
            }
        }
    }
}

// MARK: - Properties

/// Marsaglia's xorshift64: deterministic, no dependencies.
private struct XorShift {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed == 0 ? 0x9E37_79B9_7F4A_7C15 : seed
    }

    mutating func next() -> UInt64 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return state
    }

    /// Uniform enough in 0..<bound (bound > 0).
    mutating func int(_ bound: Int) -> Int {
        Int(next() % UInt64(bound))
    }

    mutating func chance(_ percent: Int) -> Bool {
        int(100) < percent
    }

    mutating func shuffle<T>(_ array: inout [T]) {
        guard array.count > 1 else { return }
        for i in stride(from: array.count - 1, to: 0, by: -1) {
            array.swapAt(i, int(i + 1))
        }
    }
}

/// A random "true" history of one document: revisions with their real parents and deleted flags.
private struct TrueTree {
    var revisions: [RevisionID] = []
    var parents: [Int?] = []
    var deleted: [Bool] = []

    init(random: inout XorShift, size: Int) {
        let roots = 1 + random.int(2)
        for _ in 0..<roots { add(parent: nil, random: &random) }
        while revisions.count < size { add(parent: random.int(revisions.count), random: &random) }
    }

    private mutating func add(parent: Int?, random: inout XorShift) {
        let generation = parent.map { revisions[$0].generation + 1 } ?? (1 + random.int(3))
        var digest: String
        repeat {
            if random.chance(70) {
                let hex = Array("0123456789abcdef")
                digest = String((0..<32).map { _ in hex[random.int(16)] })
            } else {
                let alphabet = Array("abcXYZ-é0")
                digest = String((0..<(1 + random.int(3))).map { _ in alphabet[random.int(alphabet.count)] })
            }
        } while revisions.contains(RevisionID(generation: generation, digest: digest))
        revisions.append(RevisionID(generation: generation, digest: digest))
        parents.append(parent)
        deleted.append(random.chance(25))
    }

    var leafIndexes: [Int] {
        let withChildren = Set(parents.compactMap { $0 })
        return revisions.indices.filter { !withChildren.contains($0) }
    }

    /// Newest first, from `index` back to its root.
    func history(of index: Int) -> [Int] {
        var result = [index]
        while let parent = parents[result.last!] { result.append(parent) }
        return result
    }

    /// Histories as a peer could send them: every leaf, some cut short (sent from a stemmed peer),
    /// and, when `innerNodes`, some inner revisions sent with their bodies.
    func histories(random: inout XorShift, innerNodes: Bool) -> [[Int]] {
        var result: [[Int]] = []
        for leaf in leafIndexes {
            var full = history(of: leaf)
            if random.chance(35) { full = Array(full.prefix(1 + random.int(full.count))) }
            result.append(full)
        }
        if innerNodes {
            for index in revisions.indices where !leafIndexes.contains(index) && random.chance(30) {
                let full = history(of: index)
                result.append(Array(full.prefix(1 + random.int(full.count))))
            }
        }
        return result
    }
}

private struct Shape: Hashable {
    let revision: RevisionID
    let parent: RevisionID?
    let isDeleted: Bool
}

private func shape(_ tree: RevisionTree) -> Set<Shape> {
    Set(tree.nodes.map {
        Shape(revision: $0.revision, parent: $0.parent.map { tree.nodes[$0].revision }, isDeleted: $0.isDeleted)
    })
}

private func merged(_ histories: [[Int]], of truth: TrueTree, stemLimit: Int? = nil) -> RevisionTree {
    var tree = RevisionTree()
    for history in histories {
        let newest = history[0]
        _ = tree.merge(history: history.map { truth.revisions[$0] }, isDeleted: truth.deleted[newest], hasBody: true)
        if let stemLimit { tree.stem(limit: stemLimit) }
        checkInvariants(tree)
    }
    return tree
}

@Suite struct RevisionTreePropertyTests {
    @Test func mergeOrderDoesNotMatter() {
        var random = XorShift(seed: 0xC0FFEE)
        for _ in 0..<150 {
            let truth = TrueTree(random: &random, size: 2 + random.int(25))
            let histories = truth.histories(random: &random, innerNodes: true)

            // What the union of the histories says, independently of the merge code.
            var expected: [RevisionID: Shape] = [:]
            var newest = Set<Int>()
            for history in histories { newest.insert(history[0]) }
            for history in histories {
                for (position, index) in history.enumerated() {
                    let parent = position + 1 < history.count ? truth.revisions[history[position + 1]] : nil
                    let known = expected[truth.revisions[index]]
                    expected[truth.revisions[index]] = Shape(
                        revision: truth.revisions[index], parent: known?.parent ?? parent,
                        isDeleted: newest.contains(index) && truth.deleted[index])
                }
            }

            let reference = merged(histories, of: truth)
            #expect(shape(reference) == Set(expected.values))
            for _ in 0..<4 {
                var order = histories
                random.shuffle(&order)
                let tree = merged(order, of: truth)
                #expect(shape(tree) == shape(reference))
                #expect(tree.winner == reference.winner)
                #expect(tree == reference)                          // canonical node order
                #expect(tree.leaves == reference.leaves)
            }
        }
    }

    @Test func winnerIsIndependentOfInsertionOrder() {
        var random = XorShift(seed: 0xBADC0FFEE)
        for _ in 0..<150 {
            let truth = TrueTree(random: &random, size: 2 + random.int(30))
            let histories = truth.histories(random: &random, innerNodes: false)
            // The expected winner straight from the rule, over the true leaves.
            let expected = truth.leafIndexes
                .map { RevisionTree.Leaf(revision: truth.revisions[$0], isDeleted: truth.deleted[$0]) }
                .max { a, b in
                    if a.isDeleted != b.isDeleted { return a.isDeleted }
                    return a.revision < b.revision
                }
            let stemLimit: Int? = random.chance(50) ? 1 + random.int(5) : nil
            for _ in 0..<4 {
                var order = histories
                random.shuffle(&order)
                let tree = merged(order, of: truth, stemLimit: stemLimit)
                #expect(tree.winner == expected)
                #expect(Set(tree.conflicts + tree.deletedConflicts + [tree.winner!.revision])
                        == Set(truth.leafIndexes.map { truth.revisions[$0] }))
            }
        }
    }

    @Test func stemKeepsLeavesAndBoundsPaths() throws {
        var random = XorShift(seed: 0x5EED)
        for _ in 0..<300 {
            let truth = TrueTree(random: &random, size: 1 + random.int(40))
            let original = merged(truth.histories(random: &random, innerNodes: false), of: truth)
            let limit = 1 + random.int(7)
            var tree = original
            let removed = tree.stem(limit: limit)
            checkInvariants(tree)

            #expect(tree.leaves == original.leaves)
            #expect(tree.winner == original.winner)
            for leaf in tree.leaves {
                #expect(tree.history(of: leaf.revision).count <= limit)
            }
            let kept = Set(tree.nodes.map(\.revision))
            #expect(kept.isDisjoint(with: removed))
            #expect(kept.union(removed) == Set(original.nodes.map(\.revision)))
            #expect(removed == removed.sorted())
            // Links between kept revisions are the original ones; flags are untouched.
            for node in tree.nodes {
                let before = try #require(original.node(node.revision))
                #expect(node.isDeleted == before.isDeleted && node.hasBody == before.hasBody)
                if let parent = node.parent {
                    #expect(original.nodes[before.parent!].revision == tree.nodes[parent].revision)
                } else if let parent = before.parent {
                    #expect(!kept.contains(original.nodes[parent].revision))
                }
            }
            // Linear paths keep exactly the newest `limit` revisions, as CouchDB does.
            for leaf in original.leaves where original.leaves.count == 1 {
                #expect(tree.history(of: leaf.revision) == Array(original.history(of: leaf.revision).prefix(limit)))
            }
            // Idempotent.
            var again = tree
            #expect(again.stem(limit: limit).isEmpty)
            #expect(again == tree)
            // And it survives storage.
            #expect(try RevisionTree(encoded: tree.encoded()) == tree)
        }
    }
}

// MARK: - Purging (couch_key_tree:remove_leafs)

@Suite struct RevisionTreePurgeTests {
    @Test func purgingOneBranchKeepsTheSharedAncestors() {
        var tree = makeTree(path("3-1aa", "2-1a", "1-1"), path("3-1bb", "2-1b", "1-1"))
        let (purged, removed) = tree.purge([rev("3-1bb"), rev("2-1a")])
        // 2-1a is not a leaf: ignored.
        #expect(purged == [rev("3-1bb")])
        #expect(Set(removed) == [rev("2-1b"), rev("3-1bb")])
        #expect(links(tree) == links(makeTree(path("3-1aa", "2-1a", "1-1"))))
        #expect(tree.winner?.revision == rev("3-1aa"))
    }

    @Test func purgingEveryLeafEmptiesTheTree() {
        var tree = makeTree(path("2-1a", "1-1"), path("2-1b", "1-1"))
        let (purged, removed) = tree.purge([rev("2-1a"), rev("2-1b"), rev("9-zz")])
        #expect(Set(purged) == [rev("2-1a"), rev("2-1b")])
        #expect(removed.count == 3)
        #expect(tree.isEmpty)
    }
}
