import Foundation
import Hummingbird
import Logging
import PushDelivery
import RichPushCore

/// Live Activities (docs/api.md#live-activities): push-to-start and update tokens, and an
/// activity's start, updates and end on every device of its audience (`Endpoint.liveActivities`).
struct LiveActivitiesController: Sendable {
    let apps: AppCatalog
    let activities: LiveActivityStore
    let dispatcher: any PushDispatching

    /// The largest body taken (an activity's JSON is at most 4 KiB as a push).
    static let bodyLimit = 64 << 10

    // MARK: tokens

    /// `PUT /api/register/{id}/live-activities/{type}`: the device's push-to-start token for an
    /// attributes type, replacing the one before.
    func setPushToStartToken(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let user = try context.requireUser()
        let id = try context.parameters.require("id"), type = try context.parameters.require("type")
        let body = try await RequestBody.collect(request, upTo: 16 << 10, what: "a push-to-start token")
        let token = try RequestBody.decode(PushToStartTokenBody.self, from: Data(body.readableBytesView), shape: "{\"pushToStartToken\":\"<hex>\"}")
        try await activities.setPushToStartToken(registration: id, owner: user, type: type, token: token.pushToStartToken)
        return Response(status: .noContent)
    }

    /// `DELETE /api/register/{id}/live-activities/{type}`.
    func removePushToStartToken(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let user = try context.requireUser()
        try await activities.removePushToStartToken(registration: try context.parameters.require("id"), owner: user,
                                                    type: try context.parameters.require("type"))
        return Response(status: .noContent)
    }

    /// `PUT /api/live-activities/{id}/tokens`: the activity's update token on one of the caller's
    /// devices (a rotated one replaces the old).
    func reportToken(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let user = try context.requireUser()
        let id = try context.parameters.require("id")
        let body = try await RequestBody.collect(request, upTo: 16 << 10, what: "an update token")
        let report = try RequestBody.decode(ActivityTokenBody.self, from: Data(body.readableBytesView), shape: "{\"registration\",\"token\":\"<hex>\"}")
        if try await activities.reportToken(activity: id, registration: report.registration, owner: user, token: report.token) {
            dispatcher.outboxChanged()
        }
        return Response(status: .noContent)
    }

    // MARK: lifecycle

    /// `POST /api/live-activities`: starts an activity on every device of the audience.
    func startActivity(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let caller = try context.requirePrincipal()
        let body = try await RequestBody.collect(request, upTo: Self.bodyLimit, what: "a live activity")
        let asked = try RequestBody.decode(LiveActivityStartRequest.self, from: Data(body.readableBytesView), shape: LiveActivityStartRequest.shape)
        let type = try LiveActivityStore.checkedType(asked.type)
        guard let alert = try asked.alert?.checked("alert") else {
            throw Problem(.unprocessableContent, "alert.title is required to start a live activity: iOS drops a start push without an alert (APNs accepts it, the phone shows nothing)")
        }
        if let score = asked.relevanceScore, !(0...100).contains(score) { throw Problem(.badRequest, "relevanceScore must be 0 to 100") }
        let app = try apps.appAllowed(asked.app, for: caller) ?? AppName.default
        // The JSON is checked (400) and the push measured (413) by the store, before it reads or writes anything.
        var draft = LiveActivityDraft(type: type, audience: try asked.audience.audience, app: app, attributes: asked.attributes?.text ?? "{}",
                                      contentState: asked.contentState.text,
                                      alert: alert, staleDate: asked.staleDate?.date, relevanceScore: asked.relevanceScore)
        // docs/api.md#dry-runs: checked as a start is; nothing is stored or sent, and no channel is made.
        if asked.dryRun == true { return try JSONResponse.encode(DryRunResponse(try await activities.dryRun(draft, broadcast: asked.broadcast == true))) }
        if asked.broadcast == true {
            do {
                draft.channelId = try await dispatcher.createChannel(app: app)
            } catch let error as PushError where error.isConfiguration {
                throw Problem(.unprocessableContent, "no broadcast channel: \(error.message)")
            } catch let error as PushError {
                throw Problem(.serviceUnavailable, "no broadcast channel: \(error.message)", headers: [.retryAfter: "5"])
            }
        }
        let queued: LiveActivityQueued
        do {
            queued = try await activities.start(draft, by: caller.user, audit: context.auditActor(request))
        } catch {
            // Refused or not stored: its channel goes back to APNs rather than staying unused.
            if let channel = draft.channelId {
                do { try await dispatcher.deleteChannel(channel, app: app) } catch {
                    context.logger.warning("broadcast channel of an activity not started stays at APNs", metadata: ["channel": "\(channel)", "error": "\(error)"])
                }
            }
            throw error
        }
        dispatcher.outboxChanged()
        context.logger.info("live activity started", metadata: ["activity": "\(queued.activity.id)", "devices": "\(queued.devices)",
                                                                "by": "\(caller.user)"])
        var response = try JSONResponse.encode(LiveActivityQueuedResponse(id: queued.activity.id, devices: queued.devices, timestamp: queued.timestamp,
                                                                          channelId: queued.activity.channelId, state: queued.activity.state),
                                               status: .accepted)
        response.headers[.location] = "/api/live-activities/\(queued.activity.id)"
        return response
    }

    /// `PATCH /api/live-activities/{id}`: new content on every device.
    func updateActivity(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try await change(request, context, end: false)
    }

    /// `DELETE /api/live-activities/{id}`: ends it, with an optional last state and dismissal time.
    func endActivity(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        try await change(request, context, end: true)
    }

    private func change(_ request: Request, _ context: AppRequestContext, end: Bool) async throws -> Response {
        let id = try await changeable(context)
        let body = try await RequestBody.collect(request, upTo: Self.bodyLimit, what: "a live activity change")
        let bytes = Data(body.readableBytesView)
        let asked = bytes.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) && end
            ? LiveActivityChangeRequest()
            : try RequestBody.decode(LiveActivityChangeRequest.self, from: bytes, shape: LiveActivityChangeRequest.shape)
        guard end || asked.contentState != nil else { throw Problem(.badRequest, "contentState is required to update a live activity") }
        if let priority = asked.priority, priority != 5 && priority != 10 { throw Problem(.badRequest, "priority must be 5 or 10") }
        let change = LiveActivityChange(contentState: asked.contentState?.text, alert: try asked.alert?.checked("alert"),
                                        staleDate: asked.staleDate?.date, priority: asked.priority, dismissAt: asked.dismissAt?.date)
        let queued = try await activities.change(id, change, end: end, audit: context.auditActor(request))
        dispatcher.outboxChanged()
        context.logger.info(end ? "live activity ended" : "live activity updated",
                            metadata: ["activity": "\(id)", "pushes": "\(queued.devices)", "timestamp": "\(queued.timestamp)"])
        return try JSONResponse.encode(LiveActivityQueuedResponse(id: id, devices: queued.devices, timestamp: queued.timestamp,
                                                                  channelId: queued.activity.channelId, state: queued.activity.state),
                                       status: .accepted)
    }

    /// The activity `{id}`, for a caller who may change it: an admin any of its app's, a `send`
    /// key only those it started (403); 404 where the caller could not read it.
    private func changeable(_ context: AppRequestContext) async throws -> String {
        let id = try context.parameters.require("id")
        let caller = try context.requirePrincipal()
        guard let activity = try await activities.activity(id, app: caller.apiKey?.app) else {
            throw Problem(.notFound, "no live activity \(id.prefix(40))")
        }
        if let key = caller.apiKey, !key.scope.covers(.admin), activity.createdBy != caller.user {
            throw Problem(.forbidden, "API key \(key.name) did not start live activity \(id); a send key changes only its own (an admin key or account changes any)")
        }
        return id
    }

    /// `GET /api/live-activities/{id}`: its state, devices, updates and failures.
    func showActivity(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let id = try context.parameters.require("id")
        let caller = try context.requirePrincipal()
        guard let activity = try await activities.activity(id, app: caller.apiKey?.app, devices: true) else {
            throw Problem(.notFound, "no live activity \(id.prefix(40))")
        }
        return try JSONResponse.encode(LiveActivityResponse(activity, devices: true))
    }

    /// `GET /api/live-activities`: the newest first.
    func listActivities(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let caller = try context.requirePrincipal()
        let (limit, _) = try Paging.page(request, defaultLimit: 50)
        let list = try await activities.list(limit: limit, app: caller.apiKey?.app)
        return try JSONResponse.encode(list.map { LiveActivityResponse($0, devices: false) })
    }
}
