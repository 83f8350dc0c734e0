import CouchStore
import Foundation
import Synchronization
import Testing

/// A data directory another owner holds is refused, and the refusal closes only the descriptor
/// it opened: a descriptor closed twice may be one another thread has opened since under the
/// same number (a client's socket, a database file), which then dies under its owner.
@Suite struct DataDirectoryLockTests {
    @Test func aDirectoryInUseIsRefusedAndClosesOnlyItsOwnDescriptor() throws {
        let directory = NSTemporaryDirectory() + "couchette-lock-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let owner = try DataDirectoryLock(directory: directory)
        owner.publish(address: "http://127.0.0.1:5984/")

        // Another thread opens descriptors all along, each taking the lowest free number (the
        // one a refusal has just closed), and checks each is still open before closing it.
        let stop = Atomic(false)
        let closedUnderneath = Atomic(0)
        let opener = Thread {
            while !stop.load(ordering: .relaxed) {
                let descriptor = open("/dev/null", O_RDONLY | O_CLOEXEC)
                guard descriptor >= 0 else { continue }
                for _ in 0..<200 { _ = fcntl(descriptor, F_GETFD) }
                if fcntl(descriptor, F_GETFD) < 0 || close(descriptor) != 0 { closedUnderneath.add(1, ordering: .relaxed) }
            }
        }
        opener.start()
        var refusals = 0
        for _ in 0..<2000 {
            do {
                _ = try DataDirectoryLock(directory: directory)
            } catch let inUse as DataDirectoryLock.InUse {
                #expect(inUse.address == "http://127.0.0.1:5984/")
                refusals += 1
            }
        }
        stop.store(true, ordering: .relaxed)
        while !opener.isFinished { usleep(1000) }
        #expect(refusals == 2000)
        #expect(closedUnderneath.load(ordering: .relaxed) == 0)
        owner.release()
        _ = try DataDirectoryLock(directory: directory)
    }
}
