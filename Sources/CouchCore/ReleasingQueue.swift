/// A first-in, first-out queue that lets an item go as soon as it is taken: work done must not
/// keep what it captured (an answer's body, a replication's batch) alive until the queue is
/// compacted. Taken places are dropped once they are half of it. Not synchronised.
struct ReleasingQueue<Element> {
    private var items: [Element?] = []
    private var head = 0

    var count: Int { items.count - head }
    var isEmpty: Bool { head == items.count }

    mutating func append(_ item: Element) {
        items.append(item)
    }

    mutating func popFirst() -> Element? {
        guard head < items.count else { return nil }
        defer {
            items[head] = nil
            head += 1
            if head == items.count {
                items.removeAll(keepingCapacity: true)
                head = 0
            } else if head > 256 && head * 2 > items.count {
                items.removeFirst(head)
                head = 0
            }
        }
        return items[head]
    }
}

extension ReleasingQueue: Sendable where Element: Sendable {}
