import Foundation
import SQLEngine

extension LiveActivityStore {
    /// What `start` would do with `draft`, found without doing it (docs/api.md#dry-runs), read
    /// only: the same checks (400 for JSON that is not an object, 413 for a push over 4 KiB or
    /// an audience past `maxDevices`), the devices it would start on by platform (iOS devices
    /// through their push-to-start token for the type), and up to `DryRun.samplesPerPlatform`
    /// start pushes per platform. Nothing is stored or sent. The samples name the activity
    /// `DryRun.placeholderActivity`; with `broadcast`, no channel is made (that is a call to
    /// APNs): the start push names `DryRun.placeholderChannel`.
    public func dryRun(_ draft: LiveActivityDraft, broadcast: Bool) async throws -> DryRun {
        try await database.read { db in
            let now = db.now
            let id = DryRun.placeholderActivity
            // First, as `start`: JSON that is not an object is 400 and a push too large 413.
            let payloads = try Self.payloads(activity: id, event: "start", timestamp: Int64(now), type: draft.type, attributes: draft.attributes,
                                             contentState: draft.contentState, alert: draft.alert, staleDate: draft.staleDate,
                                             relevanceScore: draft.relevanceScore, channel: broadcast ? DryRun.placeholderChannel : nil)
            let (targets, withoutToken) = try Self.startTargets(db, draft)
            var run = DryRun()
            run.devices = targets.count
            run.users = Set(targets.map(\.user)).count
            for target in targets {
                run.count(app: draft.app, platform: target.platform)
                guard !run.sampled(target.platform) else { continue }
                // As the outbox's claim makes a start's job: priority 10, living the 8 hours an activity lives.
                var job = DeliveryJob(id: 0, notificationId: 0, registrationId: target.registration, target: target.target, payload: payloads.apns,
                                      mode: .alert, pushId: "", platform: target.platform)
                job.app = draft.app
                job.recipient = target.user
                job.activity = ActivityPush(id: id, type: draft.type, event: "start", priority: 10, twin: payloads.twin)
                job.expiresAt = Date(timeIntervalSince1970: now + Self.maxAge)
                run.samples.append(DryRun.Sample(user: target.user, platform: target.platform, app: draft.app, variant: nil, job: job, failure: nil))
            }
            if withoutToken > 0 {
                run.warnings.append("\(withoutToken) iOS device\(withoutToken == 1 ? " has" : "s have") no push-to-start token for \(draft.type): the start skips "
                                    + "\(withoutToken == 1 ? "it" : "them") (the app registers one with PUT /api/register/{id}/live-activities/\(draft.type))")
            }
            if broadcast {
                run.warnings.append("broadcast: no channel was made (a dry run calls no push service); a start asks APNs for one, and is 422 "
                                    + "when app \(draft.app) has no APNs credentials of its own, 503 when APNs does not answer")
            }
            return run
        }
    }
}
