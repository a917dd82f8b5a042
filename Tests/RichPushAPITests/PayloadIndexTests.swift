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

    @Test("the follower passes over the notifications made here that follow what it read with no other id between, and reads from the first gap (another node's, or a batch rolled back); ranges it passed are forgotten, and past 256 the lowest")
    func followerPassesOverWhatWasMadeHere() {
        let index = PayloadIndex(capacity: 100)
        func made(_ ids: [Int64]) { index.made(ids.map { QueuedNotification(id: $0, recipient: "alice", payload: old) }) }
        // Two batches in a row (given out of order, adjacent: one range), then one after a gap.
        made([6, 4, 5])
        made([7, 8, 9])
        made([12, 13])
        #expect(index.get(5)?.recipient == "alice" && index.get(13) != nil)
        // Read up to 3: 4–9 are indexed, so the read goes on after 9; 10 and 11 are another's.
        #expect(index.followAfter(3) == 9)
        #expect(index.followAfter(9) == 9)
        // The read from 9 found 10–13 (13 the last); the range 12–13 it passed is forgotten.
        #expect(index.followAfter(13) == 13)
        made([14])
        #expect(index.followAfter(13) == 14)
        // A range below what was read is forgotten, not followed later.
        made([20, 21])
        #expect(index.followAfter(30) == 30 && index.followAfter(19) == 19)
        // Read up to 1 with nothing made after it: no gap passed over.
        made([3])
        #expect(index.followAfter(1) == 1)
        #expect(index.followAfter(2) == 3)
        // 300 ranges (every other id): the lowest 44 are forgotten, so the follower reads them.
        made(stride(from: 1_000, to: 1_600, by: 2).map { Int64($0) })
        #expect(index.followAfter(999) == 999)
        #expect(index.followAfter(1_087) == 1_088)
        #expect(index.followAfter(1_089) == 1_090)
    }
}
