import Foundation
import HTTPTypes
import Hummingbird
import Logging
import PushDelivery
import Resilience
import RichPushCore

/// Device registrations and the Web Push key they subscribe with (`Endpoint.registrations`, `Endpoint.webPush`).
struct DevicesController: Sendable {
    /// The server's apps.
    let apps: AppCatalog
    /// `serve --allow-private-push-endpoints`: Web Push endpoints may name private addresses.
    let allowPrivatePushEndpoints: Bool
    let registrations: RegistrationStore
    /// Notification Hubs' copy of the registrations, when delivering through a hub.
    let mirror: (any RegistrationMirror)?
    let dispatcher: any PushDispatching

    func createRegistration(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let handle = request.uri.queryParameters.get("handle")
        let registration = try await registrations.create(for: try context.requireUser(), replacingHandle: handle)
        return try JSONResponse.encode(RegistrationCreated(registrationId: registration.id))
    }

    func updateRegistration(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let id = try context.parameters.require("id")
        let body = try await request.body.collect(upTo: 64 * 1024)
        let update = try RequestBody.decode(RegistrationUpdate.self, from: Data(body.readableBytesView),
                                            shape: "{\"platform\":\"apns\"|\"fcm\"|\"web\",\"handle\":<APNs hex token, FCM token or PushSubscription>,\"tags\":[...]}")
        let app = try apps.knownApp(update.app, for: context.principal) ?? AppName.default
        let throughHub = mirror != nil && hubApps.contains(app)
        if throughHub && update.platform.lowercased() != "apns" {
            throw Problem(.unprocessableContent, "this server delivers app \(app) through Notification Hubs, which RichPush uses for APNs only; platform '\(update.platform.prefix(20))' needs FCM or Web Push credentials instead")
        }
        if update.platform.lowercased() == "web" { try await checkPushEndpoint(update.handle.text) }
        let registration = try await registrations.update(id: id, for: try context.requireUser(),
                                                          with: DeviceRegistration(platform: update.platform, handle: update.handle.text,
                                                                                   tags: update.tags ?? [], replaces: update.replaces, app: app,
                                                                                   appVersion: update.appVersion, osVersion: update.osVersion))
        if let mirror, throughHub {
            do { try await mirror.upsert(registration) } catch let error as DependencyUnavailable {
                throw Problem(.serviceUnavailable, "registration \(id) is saved, but \(error.dependency.phrase) is not answering; PUT it again in \(error.retryAfter) s",
                              headers: [.retryAfter: String(error.retryAfter)])
            } catch {
                // The hub's own words (its namespace, its errors) go to the log, not to the device.
                context.logger.error("the hub did not take a registration", metadata: ["registration": "\(id)", "error": "\(error)"])
                throw Problem(.badGateway, "registration \(id) is saved, but the push service did not take it; PUT it again (request id \(context.id))")
            }
        }
        return try JSONResponse.encode(RegistrationResponse(registrationId: registration.id, platform: registration.platform ?? "",
                                                            handle: registration.handle ?? "", tags: registration.tags, app: registration.app,
                                                            appVersion: registration.appVersion, osVersion: registration.osVersion))
    }

    /// Refuses (422) a subscription whose endpoint RichPush would never send to: not https, not
    /// port 443, an IP address, or a name that does not resolve or resolves to any non-public
    /// address (`--allow-private-push-endpoints` lifts this, for local stand-ins). A malformed
    /// subscription is 400, as the registration store would say.
    func checkPushEndpoint(_ handle: String) async throws {
        let subscription = try WebPushSubscription(jsonText: handle)
        do {
            try await OutboundPolicy(allowPrivate: allowPrivatePushEndpoints).check(subscription.endpoint)
        } catch let error as OutboundError where error.isTimeout {
            // A name server that did not answer now says nothing of the endpoint: try again later.
            throw Problem(.serviceUnavailable, error.message, headers: [.retryAfter: "30"])
        } catch let error as OutboundError {
            throw Problem(.unprocessableContent, error.message)
        }
    }

    func deleteRegistration(_ request: Request, _ context: AppRequestContext) async throws -> Response {
        let id = try context.parameters.require("id")
        // docs/operations.md#audit-log: an admin removing a user's device in the console; a device's own removal is not audited.
        let audit = context.consoleAdmin == nil ? nil : context.auditActor(request)
        try await registrations.delete(id: id, for: try context.requireUser(), audit: audit)
        if let mirror {
            do { try await mirror.delete(registrationID: id) } catch {
                context.logger.warning("registration deleted here but not in the hub", metadata: ["id": "\(id)", "error": "\(error)"])
            }
        }
        return try JSONResponse.encode(RegistrationDeleted(registrationId: id, deleted: true))
    }

    func webPushKey(_ request: Request) throws -> Response {
        let app = try apps.knownApp(request.uri.queryParameters.get("app").map { String($0) }, isPublic: true) ?? AppName.default
        guard let key = apps.vapidPublicKey(app) else {
            throw Problem(.notFound, app == AppName.default ? "this server sends no Web Push; start serve with --vapid-key and --vapid-subject"
                                                            : "app \(app) sends no Web Push: give it \"webpush\" in serve --apps")
        }
        return try JSONResponse.encode(WebPushKeyResponse(publicKey: key))
    }

    /// The apps whose registrations are mirrored into a hub.
    var hubApps: Set<String> {
        dispatcher.addressing.tagApps.union(apps.hubApps)
    }
}
