extension RevisionTree {
    /// Keeps at most `limit` revisions on every root-to-leaf path (CouchDB's `_revs_limit`,
    /// `couch_key_tree:stem`) and returns the revisions removed, in ascending order.
    ///
    /// Leaves are never removed (a `limit` below 1 counts as 1). Working up from the leaves, a node is
    /// kept when it is a leaf, or when at least one child is kept and the tallest kept child subtree
    /// plus the node itself is at most `limit` revisions tall. Links between kept nodes are kept; a
    /// kept node whose parent is removed becomes a root.
    ///
    /// On a linear history this is exactly CouchDB's stem (the newest `limit` revisions survive). On a
    /// branched tree CouchDB keeps every revision within `limit` of *some* leaf and leaves the links
    /// between them, so a path through a shared ancestor can exceed `limit` (1→2→3→4 with a second
    /// leaf 3' under 2, limit 2, keeps 2→3→4). Here such an ancestor goes (3→4 and 3' become roots):
    /// the two rules agree whenever CouchDB's result respects the limit, and this one always does.
    @discardableResult
    public mutating func stem(limit: Int) -> [RevisionID] {
        let limit = Swift.max(1, limit)
        let count = nodes.count
        // No path is longer than the tree has nodes: nothing to stem (nearly every write).
        guard count > limit else { return [] }
        let hasChild = childFlags
        var tallestKeptChild = [Int](repeating: 0, count: count)
        var keep = [Bool](repeating: false, count: count)
        // Children come after their parents, so walking backwards sees a node's children first.
        for index in stride(from: count - 1, through: 0, by: -1) {
            let height: Int
            if !hasChild[index] {
                height = 1
            } else if tallestKeptChild[index] > 0 {
                height = tallestKeptChild[index] + 1
            } else {
                continue                      // every child was removed: keeping it would make a false leaf
            }
            guard height <= limit else { continue }
            keep[index] = true
            if let parent = nodes[index].parent, tallestKeptChild[parent] < height {
                tallestKeptChild[parent] = height
            }
        }

        var removed: [RevisionID] = []
        var newIndex = [Int](repeating: -1, count: count)
        var kept: [Node] = []
        kept.reserveCapacity(count)
        for index in 0..<count {
            var node = nodes[index]
            guard keep[index] else {
                removed.append(node.revision)
                continue
            }
            if let parent = node.parent {
                node.parent = keep[parent] ? newIndex[parent] : nil
            }
            newIndex[index] = kept.count
            kept.append(node)
        }
        if !removed.isEmpty { nodes = kept }
        return removed
    }
}
