import Foundation

/// A saved segment: a named filter (docs/api.md#segments).
public struct SavedSegment: Sendable, Equatable {
    public var name: String
    /// The filter as saved: a `segment` in it stays a reference, inlined when the segment is used.
    public var filter: SegmentFilter
    /// Who saved it first (an admin's or an API key's name).
    public var createdBy: String?
    /// When it was last saved.
    public var updatedAt: Date

    /// Creates a segment.
    public init(name: String, filter: SegmentFilter, createdBy: String?, updatedAt: Date) {
        self.name = name
        self.filter = filter
        self.createdBy = createdBy
        self.updatedAt = updatedAt
    }
}
