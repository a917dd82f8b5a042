import Foundation
import MediaStore
@testable import RichPushAPI
import RichPushCore
import Testing

@Suite("The payload index never keeps what a change removed")
struct PayloadIndexTests {
    let old = MediaID(hashing: Data("old image".utf8)), new = MediaID(hashing: Data("new image".utf8))

    @Test("a read made before a change, stored after the change removed the entry (the follower's batch, a fetch's set), is not stored: the next fetch misses and reads the database")
    func readAcrossRemovalIsDropped() {
        let index = PayloadIndex(capacity: 100)
        // The follower reads notification 7 with its old image, then a PATCH commits and removes it.
        let before = index.mark()
        let read = [(notification: QueuedNotification(id: 7, recipient: "alice", payload: old), read: false)]
        index.remove([7])
        index.load(read, since: before)
        #expect(index.get(7) == nil)
        // The same for a fetch that read it before the change.
        index.set(7, .init(recipient: "alice", payload: old, read: true), since: before)
        #expect(index.get(7) == nil)
        // A read that began after the change is stored.
        let after = index.mark()
        index.load([(notification: QueuedNotification(id: 7, recipient: "alice", payload: new), read: false)], since: after)
        #expect(index.get(7)?.payload == new)
        // What is known is kept over a later read of the same id.
        index.load([(notification: QueuedNotification(id: 7, recipient: "alice", payload: old), read: true)], since: index.mark())
        #expect(index.get(7)?.payload == new && index.get(7)?.read == false)
        // Removing everything (a user removed) stops reads begun before it too.
        let beforeAll = index.mark()
        index.removeAll()
        index.set(8, .init(recipient: "bob", payload: old, read: true), since: beforeAll)
        #expect(index.get(8) == nil && index.count == 0)
        // Removing nothing is not a removal.
        let quiet = index.mark()
        index.remove([])
        index.set(8, .init(recipient: "bob", payload: old, read: true), since: quiet)
        #expect(index.get(8)?.recipient == "bob")
    }
}
