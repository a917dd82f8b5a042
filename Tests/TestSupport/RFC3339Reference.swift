import Foundation

/// jsonschema's verdict on `format: date-time` for each of `texts`, and the instant when valid,
/// from `scripts/rfc3339-reference.py`. Blocks while Python runs: call it on a thread of its own
/// (`onOwnThread`).
public func rfc3339Reference(_ texts: [String]) throws -> [(valid: Bool, epoch: Double?)] {
    try pythonReference("rfc3339-reference.py", input: texts, count: texts.count)
        .map { (valid: ($0["valid"] as? Bool) ?? false, epoch: ($0["epoch"] as? NSNumber)?.doubleValue) }
}

/// Whether `python3` has rfc3339-validator (what `rfc3339Reference` needs; openapi-spec-validator
/// brings it).
public func rfc3339ReferenceAvailable() -> Bool { pythonHas("rfc3339_validator") }
