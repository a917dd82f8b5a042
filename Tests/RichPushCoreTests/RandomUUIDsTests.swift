import Foundation
import Testing
@testable import RichPushCore

/// `RandomUUIDs`: push ids drawn many at a time.
@Suite("Random UUIDs in bulk")
struct RandomUUIDsTests {
    @Test("20,000 drawn in batches are all distinct, each Foundation's spelling of a version 4 UUID with RFC 9562's variant, and their bits are even (each of the 122 random bits set in 45–55% of them)")
    func distinctAndRandom() throws {
        let drawn = (0..<40).flatMap { _ in RandomUUIDs.strings(500) } + [RandomUUIDs.string()]
        #expect(drawn.count == 20_001)
        #expect(Set(drawn).count == drawn.count)
        var ones = [Int](repeating: 0, count: 128)
        for text in drawn {
            let uuid = try #require(UUID(uuidString: text), "\(text)")
            #expect(uuid.uuidString == text)
            let bytes = withUnsafeBytes(of: uuid.uuid) { Array($0) }
            #expect(bytes[6] >> 4 == 4, "version: \(text)")
            #expect(bytes[8] >> 6 == 0b10, "variant: \(text)")
            for bit in 0..<128 where bytes[bit / 8] & (0x80 >> UInt8(bit % 8)) != 0 { ones[bit] += 1 }
        }
        let fixed: Set<Int> = [48, 49, 50, 51, 64, 65] // the version's four bits and the variant's two
        for bit in 0..<128 where !fixed.contains(bit) {
            let share = Double(ones[bit]) / Double(drawn.count)
            #expect(share > 0.45 && share < 0.55, "bit \(bit) set in \(share) of them")
        }
        #expect(RandomUUIDs.strings(0).isEmpty)
    }
}
