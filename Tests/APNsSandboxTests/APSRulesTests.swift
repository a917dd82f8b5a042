import APNsSandbox
import Foundation
import Testing

/// The APNs stand-in refuses what Apple refuses in `aps`, read from JSON as a push's bytes are.
@Suite("APSRules: what Apple refuses in aps")
struct APSRulesTests {
    func verdict(_ json: String) throws -> String? {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        return APSRules.refusal(object)
    }

    @Test("what RichPush sends and Apple documents passes: an alert as text or fields, a sound by name or critical, flags as 1, a level, a score")
    func accepted() throws {
        for json in [
            #"{"alert":"Hi"}"#,
            #"{"alert":{"title":"T","subtitle":"S","body":"B","loc-key":"K"},"mutable-content":1,"sound":"default"}"#,
            #"{"alert":{"body":"B","title-loc-key":"T","loc-key":"K","loc-args":["Ann","50%"]}}"#,
            #"{"content-available":1}"#,
            #"{"badge":0,"sound":{"critical":1,"name":"alarm.caf","volume":0.5}}"#,
            #"{"thread-id":"t","category":"c","interruption-level":"time-sensitive","relevance-score":0.75}"#,
        ] {
            #expect(try verdict(json) == nil, "\(json)")
        }
    }

    @Test("each kind of mistake is refused with what is wrong", arguments: [
        (#"{"alert":5}"#, "alert must be a string or a dictionary"),
        (#"{"alert":{"title":7}}"#, "alert.title must be a string"),
        (#"{"alert":{"loc-key":"K","loc-args":"Ann"}}"#, "alert.loc-args must be an array of strings"),
        (#"{"alert":{"loc-key":"K","loc-args":[1]}}"#, "alert.loc-args must be an array of strings"),
        (#"{"badge":-1}"#, "badge must be a non-negative integer"),
        (#"{"badge":1.5}"#, "badge must be a non-negative integer"),
        (#"{"badge":true}"#, "badge must be a non-negative integer"),
        (#"{"sound":{"volume":0.5}}"#, "sound must be a name or {critical, name, volume}"),
        (#"{"sound":{"name":"a","volume":2}}"#, "sound.volume must be between 0 and 1"),
        (#"{"thread-id":3}"#, "thread-id must be a string"),
        (#"{"interruption-level":"loud"}"#, "interruption-level must be passive, active, time-sensitive or critical"),
        (#"{"relevance-score":1.5}"#, "relevance-score must be a number between 0 and 1"),
        (#"{"content-available":true}"#, "content-available must be 1"),
        (#"{"mutable-content":2}"#, "mutable-content must be 1"),
    ])
    func refused(json: String, reason: String) throws {
        let refusal = try verdict(json)
        #expect(refusal?.hasPrefix(reason) == true, "\(json): \(refusal ?? "accepted")")
    }

    @Test("the documented key lists hold what a push may carry, and no RichPush-only name")
    func keyLists() {
        #expect(APSRules.keys.isSuperset(of: ["alert", "badge", "sound", "content-available", "mutable-content", "interruption-level", "relevance-score"]))
        #expect(APSRules.alertKeys.isSuperset(of: ["title", "subtitle", "body"]))
        #expect(!APSRules.keys.contains("richId") && !APSRules.keys.contains("richUrl"))
    }
}
