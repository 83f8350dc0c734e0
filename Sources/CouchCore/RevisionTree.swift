/// A document's revision tree (CouchDB's `couch_key_tree`), as a flat array of nodes.
///
/// Invariants, kept by every mutation and checked when decoding:
/// - every revision occurs once;
/// - `nodes` is sorted ascending by `RevisionID` (generation, then digest bytes);
/// - a node's parent has generation exactly one less than the node.
///
/// Together these mean a parent always precedes its children in `nodes` (`parent < index`), so one
/// forward pass sees every parent before its children and one backward pass every child before its
/// parent, cycles are impossible, and the node order is canonical: two trees holding the same nodes
/// and links are `==` whatever order the revisions were merged in.
///
/// A tree may have several roots: histories that were stemmed (their oldest revisions dropped) or
/// that arrived without a common ancestor.
public struct RevisionTree: Sendable, Equatable {
    public struct Node: Sendable, Equatable {
        public var revision: RevisionID
        /// Index of the parent in `nodes`, nil for a root.
        public var parent: Int?
        /// The revision is a deletion (tombstone).
        public var isDeleted: Bool
        /// The store kept this revision's body (false for ancestors received without bodies, or after compaction).
        public var hasBody: Bool

        public init(revision: RevisionID, parent: Int?, isDeleted: Bool, hasBody: Bool) {
            self.revision = revision
            self.parent = parent
            self.isDeleted = isDeleted
            self.hasBody = hasBody
        }
    }

    public internal(set) var nodes: [Node]

    public init() {
        nodes = []
    }

    /// For the decoder, which has checked the invariants.
    init(validatedNodes: [Node]) {
        nodes = validatedNodes
    }

    public var isEmpty: Bool { nodes.isEmpty }

    /// Binary search (the nodes are sorted by revision).
    public func index(of revision: RevisionID) -> Int? {
        var low = 0
        var high = nodes.count
        while low < high {
            let middle = (low + high) / 2
            let order = RevisionID.order(nodes[middle].revision, revision)
            if order < 0 {
                low = middle + 1
            } else if order > 0 {
                high = middle
            } else {
                return middle
            }
        }
        return nil
    }

    public func contains(_ revision: RevisionID) -> Bool {
        index(of: revision) != nil
    }

    public func node(_ revision: RevisionID) -> Node? {
        index(of: revision).map { nodes[$0] }
    }

    // MARK: - Leaves and the winner

    public struct Leaf: Sendable, Equatable {
        public let revision: RevisionID
        public let isDeleted: Bool

        public init(revision: RevisionID, isDeleted: Bool) {
            self.revision = revision
            self.isDeleted = isDeleted
        }
    }

    /// `hasChild[i]` is true when some node has `i` as its parent.
    var childFlags: [Bool] {
        var flags = [Bool](repeating: false, count: nodes.count)
        for node in nodes {
            if let parent = node.parent { flags[parent] = true }
        }
        return flags
    }

    /// Whether the node at `index` has no children. Children come after their parent in `nodes`.
    func isLeaf(at index: Int) -> Bool {
        var i = index + 1
        while i < nodes.count {
            if nodes[i].parent == index { return false }
            i += 1
        }
        return true
    }

    /// CouchDB's leaf order (`couch_doc:to_doc_info`): sorted descending by `{not deleted, rev}`,
    /// so non-deleted leaves first, then higher generation, then greater digest.
    static func leafPrecedes(_ a: Leaf, _ b: Leaf) -> Bool {
        if a.isDeleted != b.isDeleted { return !a.isDeleted }
        return RevisionID.order(a.revision, b.revision) > 0
    }

    /// All leaves, winner first, then by CouchDB's order (non-deleted before deleted, higher
    /// generation first, greater digest first).
    public var leaves: [Leaf] {
        let hasChild = childFlags
        var result: [Leaf] = []
        for (index, node) in nodes.enumerated() where !hasChild[index] {
            result.append(Leaf(revision: node.revision, isDeleted: node.isDeleted))
        }
        result.sort(by: Self.leafPrecedes)
        return result
    }

    /// CouchDB's winning revision: a non-deleted leaf beats every deleted one (whatever their
    /// generations), then the higher generation wins, then the greater digest (byte order).
    public var winner: Leaf? {
        // A new document's: no flags to allocate.
        if nodes.count == 1 { return Leaf(revision: nodes[0].revision, isDeleted: nodes[0].isDeleted) }
        let hasChild = childFlags
        var best: Leaf?
        for (index, node) in nodes.enumerated() where !hasChild[index] {
            let leaf = Leaf(revision: node.revision, isDeleted: node.isDeleted)
            if let current = best, !Self.leafPrecedes(leaf, current) { continue }
            best = leaf
        }
        return best
    }

    /// The non-deleted leaves other than the winner, in CouchDB's `_conflicts` order (descending).
    public var conflicts: [RevisionID] {
        leaves.dropFirst().filter { !$0.isDeleted }.map(\.revision)
    }

    /// The deleted leaves other than the winner, in CouchDB's `_deleted_conflicts` order (descending).
    public var deletedConflicts: [RevisionID] {
        leaves.dropFirst().filter(\.isDeleted).map(\.revision)
    }

    public func isLeaf(_ revision: RevisionID) -> Bool {
        guard let index = index(of: revision) else { return false }
        return isLeaf(at: index)
    }

    // MARK: - Paths

    /// The path from `revision` back to its root, newest first: [revision, parent, grandparent, ...].
    /// Empty if unknown.
    public func history(of revision: RevisionID) -> [RevisionID] {
        guard var index = index(of: revision) else { return [] }
        var path = [nodes[index].revision]
        while let parent = nodes[index].parent {
            path.append(nodes[parent].revision)
            index = parent
        }
        return path
    }

    /// The leaves that descend from `revision` (itself if it is a leaf), in the order of `leaves` —
    /// used for `latest=true` (CouchDB `couch_key_tree:get_key_leafs`). Empty if unknown.
    public func leaves(descendingFrom revision: RevisionID) -> [Leaf] {
        guard let start = index(of: revision) else { return [] }
        // Parents precede children, so one forward pass marks the whole subtree.
        var inSubtree = [Bool](repeating: false, count: nodes.count)
        var hasChild = [Bool](repeating: false, count: nodes.count)
        inSubtree[start] = true
        for index in (start + 1)..<nodes.count {
            if let parent = nodes[index].parent {
                hasChild[parent] = true
                if inSubtree[parent] { inSubtree[index] = true }
            }
        }
        var result: [Leaf] = []
        for index in start..<nodes.count where inSubtree[index] && !hasChild[index] {
            result.append(Leaf(revision: nodes[index].revision, isDeleted: nodes[index].isDeleted))
        }
        result.sort(by: Self.leafPrecedes)
        return result
    }

    // MARK: - Merging

    public enum MergeOutcome: Sendable, Equatable {
        /// Extended an existing leaf (a normal edit). Also reported when the newest revision was
        /// already known but the merge still changed the tree (see `merge`).
        case newLeaf
        /// Created a new leaf elsewhere: a conflict, or a disjoint history (new root).
        case newBranch
        /// The newest revision was already in the tree and nothing changed.
        case alreadyKnown
    }

    /// Merges a revision history (newest first, consecutive generations, as in CouchDB's `_revisions`)
    /// whose newest revision is a leaf with the given deleted flag and body presence.
    ///
    /// - Older revisions not yet in the tree are inserted as ancestors without bodies
    ///   (`hasBody` false, `isDeleted` false).
    /// - If the history reaches further back than a root of the tree (a stemmed root), the old root
    ///   is re-attached under the received ancestor, as `couch_key_tree:merge` grows the shorter path.
    ///   This also joins two parts of the tree that a history shows to be connected.
    /// - Disjoint histories become new roots.
    /// - A known revision keeps its flags, except that a revision known without a body takes the
    ///   incoming flags when the incoming newest revision has one (CouchDB's `value_pref`: a stored
    ///   value beats `?REV_MISSING`).
    /// - A known revision's parent is never changed; if the history disagrees with the tree about
    ///   a parent, the older part of the history is ignored from there on.
    /// - The history is used up to its first non-consecutive generation; an empty history is a no-op.
    ///
    /// Outcome: `.alreadyKnown` exactly when the newest revision was in the tree and the tree is
    /// unchanged (re-sending a stored revision is a no-op). When the newest revision was known but the
    /// history still changed the tree (grafted older ancestors, re-joined a stemmed branch, filled in a
    /// missing body), the outcome is `.newLeaf`, so that the caller persists it as CouchDB does
    /// (CouchDB reports `internal_node` there but writes the changed tree). Otherwise `.newLeaf` when
    /// the new revisions hang under a leaf (or the tree was empty) and `.newBranch` when they hang
    /// under an internal node or start a new root.
    public mutating func merge(history: [RevisionID], isDeleted: Bool, hasBody: Bool) -> MergeOutcome {
        var count = 0
        while count < history.count,
              count == 0 || history[count].generation == history[count - 1].generation &- 1 {
            count += 1
        }
        guard count > 0 else { return .alreadyKnown }
        let history = history[0..<count]
        if nodes.isEmpty {
            // A new document (every write of a bulk load): its history, oldest first, is
            // already in the tree's order, each revision the parent of the next.
            nodes = history.reversed().enumerated().map { offset, revision in
                let isNewest = offset == count - 1
                return Node(revision: revision, parent: offset == 0 ? nil : offset - 1,
                            isDeleted: isNewest && isDeleted, hasBody: isNewest && hasBody)
            }
            return .newLeaf
        }

        // The outcome depends on the tree before the merge.
        var outcome: MergeOutcome
        if contains(history[0]) {
            outcome = .alreadyKnown
        } else if let anchor = firstKnownIndex(in: history.dropFirst()) {
            outcome = isLeaf(at: anchor) ? .newLeaf : .newBranch
        } else {
            outcome = nodes.isEmpty ? .newLeaf : .newBranch
        }

        var additions: [Node] = []        // parent resolved after insertion, through `additionParents`
        var additionParents: [RevisionID?] = []
        var relinks: [(child: Int, parent: RevisionID)] = []
        var changed = false

        for position in history.indices {
            let revision = history[position]
            let parentRevision: RevisionID? = position + 1 < count ? history[position + 1] : nil
            let isNewest = position == 0
            if let existing = index(of: revision) {
                if isNewest, hasBody, !nodes[existing].hasBody {
                    nodes[existing].hasBody = true
                    nodes[existing].isDeleted = isDeleted
                    changed = true
                }
                guard let parentRevision else { break }
                if let parent = nodes[existing].parent {
                    // Follow the tree while it agrees with the history; stop where it does not.
                    if nodes[parent].revision != parentRevision { break }
                } else {
                    relinks.append((existing, parentRevision))
                }
            } else {
                additions.append(Node(revision: revision, parent: nil,
                                      isDeleted: isNewest ? isDeleted : false,
                                      hasBody: isNewest ? hasBody : false))
                additionParents.append(parentRevision)
            }
        }

        if !additions.isEmpty || !relinks.isEmpty { changed = true }
        insert(additions, parents: additionParents, relinks: relinks)

        if outcome == .alreadyKnown && changed { outcome = .newLeaf }
        return outcome
    }

    /// The index of the first of `revisions` that is in the tree.
    private func firstKnownIndex(in revisions: ArraySlice<RevisionID>) -> Int? {
        for revision in revisions {
            if let index = index(of: revision) { return index }
        }
        return nil
    }

    /// Inserts new nodes (revisions not in the tree) keeping the sort order, then links them and
    /// the relinked roots to their parents, which must all be in the tree afterwards.
    private mutating func insert(_ additions: [Node], parents: [RevisionID?],
                                 relinks: [(child: Int, parent: RevisionID)]) {
        var relinkTargets = relinks
        if !additions.isEmpty {
            let order = additions.indices.sorted {
                RevisionID.order(additions[$0].revision, additions[$1].revision) < 0
            }
            if let last = nodes.last, RevisionID.order(additions[order[0]].revision, last.revision) < 0 {
                // Merge the two sorted sequences, remapping the old parent indexes.
                var merged: [Node] = []
                merged.reserveCapacity(nodes.count + additions.count)
                var oldToNew = [Int](repeating: 0, count: nodes.count)
                var old = 0
                var new = 0
                while old < nodes.count || new < order.count {
                    let takeOld: Bool
                    if old == nodes.count {
                        takeOld = false
                    } else if new == order.count {
                        takeOld = true
                    } else {
                        takeOld = RevisionID.order(nodes[old].revision, additions[order[new]].revision) < 0
                    }
                    if takeOld {
                        oldToNew[old] = merged.count
                        var node = nodes[old]
                        if let parent = node.parent { node.parent = oldToNew[parent] }
                        merged.append(node)
                        old += 1
                    } else {
                        merged.append(additions[order[new]])
                        new += 1
                    }
                }
                nodes = merged
                relinkTargets = relinks.map { (oldToNew[$0.child], $0.parent) }
            } else {
                // The common case (a new edit): every new node sorts after the existing ones.
                nodes.append(contentsOf: order.map { additions[$0] })
            }
            for (offset, addition) in additions.enumerated() {
                guard let parentRevision = parents[offset], let child = index(of: addition.revision) else { continue }
                nodes[child].parent = index(of: parentRevision)
            }
        }
        for relink in relinkTargets {
            nodes[relink.child].parent = index(of: relink.parent)
        }
    }

    /// Marks a stored revision as having/not having its body (used by compaction). No-op if unknown.
    public mutating func setHasBody(_ hasBody: Bool, for revision: RevisionID) {
        guard let index = index(of: revision) else { return }
        nodes[index].hasBody = hasBody
    }

    // MARK: - Replication helpers

    /// Of the given revisions, those not in the tree (input order, duplicates removed).
    public func missing(_ revisions: [RevisionID]) -> [RevisionID] {
        var seen = Set<RevisionID>()
        var result: [RevisionID] = []
        for revision in revisions where !contains(revision) && seen.insert(revision).inserted {
            result.append(revision)
        }
        return result
    }

    /// For `_revs_diff`: the leaves (deleted or not) whose generation is lower than the highest
    /// generation among `missing` (CouchDB `couch_db:possible_ancestors`). Order: CouchDB filters the
    /// leaves of `couch_doc:to_doc_info`, so this is the order of `leaves` (winner first, then
    /// non-deleted before deleted, then descending). Empty when `missing` is empty.
    public func possibleAncestors(for missing: [RevisionID]) -> [RevisionID] {
        guard let highest = missing.map(\.generation).max() else { return [] }
        return leaves.filter { $0.revision.generation < highest }.map(\.revision)
    }

    /// `revs_info` status of a revision: "missing" when its body is not kept, else "deleted" for a
    /// deletion, else "available". Nil if the revision is not in the tree.
    public enum RevisionStatus: String, Sendable { case available, deleted, missing }

    public func status(of revision: RevisionID) -> RevisionStatus? {
        guard let node = node(revision) else { return nil }
        if !node.hasBody { return .missing }
        return node.isDeleted ? .deleted : .available
    }
}
