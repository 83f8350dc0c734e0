extension RevisionTree {
    /// Removes the leaves in `revisions` (others are ignored, as CouchDB ignores them) and
    /// every ancestor left with no remaining leaf below it (`couch_key_tree:remove_leafs`).
    /// Answers the leaves removed and every revision dropped from the tree.
    public mutating func purge(_ revisions: Set<RevisionID>) -> (purged: [RevisionID], removed: [RevisionID]) {
        let hasChild = childFlags
        let purged = nodes.indices.filter { !hasChild[$0] && revisions.contains(nodes[$0].revision) }
        guard !purged.isEmpty else { return ([], []) }
        let purgedRevisions = purged.map { nodes[$0].revision }
        // A node stays when a remaining leaf descends from it (children follow their parent).
        var keep = [Bool](repeating: false, count: nodes.count)
        let purgedSet = Set(purged)
        for index in nodes.indices.reversed() where !hasChild[index] && !purgedSet.contains(index) {
            var current: Int? = index
            while let at = current, !keep[at] {
                keep[at] = true
                current = nodes[at].parent
            }
        }
        var newIndex = [Int?](repeating: nil, count: nodes.count)
        var kept: [Node] = []
        var removed: [RevisionID] = []
        for (index, node) in nodes.enumerated() {
            guard keep[index] else {
                removed.append(node.revision)
                continue
            }
            newIndex[index] = kept.count
            var copy = node
            copy.parent = node.parent.flatMap { newIndex[$0] }
            kept.append(copy)
        }
        nodes = kept
        return (purgedRevisions, removed)
    }
}
