/// Every feature room's controller, built once by `buildApplication`: what an `Endpoint`'s
/// handler is given. A room's controller holds the stores and values its handlers use; this
/// holds the controllers only.
struct Rooms: Sendable {
    let operations: OperationsController
    let media: MediaController
    let devices: DevicesController
    let notifications: NotificationsController
    let payloadLinks: PayloadLinksController
    let campaigns: CampaignsController
    let insight: InsightController
    let accounts: AccountsController
    let console: ConsoleController
}
