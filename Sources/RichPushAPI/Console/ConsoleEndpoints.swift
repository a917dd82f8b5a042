import Hummingbird
import RichPushCore

extension Endpoint {
    /// The console (docs/api.md#console): its page and the calls its script makes, with the session cookie
    /// the page's sign-in sets (no Authorization header).
    static let console: [Endpoint] = [
        Endpoint(method: .get, path: "/console", access: .open,
                 summary: "The admin console: its sign-in form without a session cookie, the console with an admin's, 403 with another user's.",
                 responses: [200: APIResponse(description: "HTML, no external resources.", content: [("text/html", .string)]),
                             403: APIResponse(description: "The session is not an admin's (HTML).", content: [("text/html", .string)])]) { rooms, r, c in
            try await rooms.console.consolePage(r, c)
        },
        Endpoint(method: .post, path: "/console/session", access: .open, summary: "Signs in to the console (form: name, password); sets the session cookie.",
                 requestBody: APIRequestBody(required: true, content: [("application/x-www-form-urlencoded", JSONSchema.type("object").with {
                     $0.properties = ["name": JSONSchema.string.with { $0.minLength = 1 }, "password": .string]
                     $0.required = ["name", "password"]
                 })], description: "The sign-in form."),
                 responses: [303: APIResponse(description: "Signed in: to /console, with the session cookie.", headers: ["Location": "/console", "Set-Cookie": "The session (HttpOnly, SameSite=Strict)."]),
                             400: APIResponse(description: "No name or password (HTML).", content: [("text/html", .string)]),
                             401: APIResponse(description: "Wrong name or password (HTML).", content: [("text/html", .string)]),
                             403: APIResponse(description: "Not an admin, or posted from another site (HTML).", content: [("text/html", .string)]),
                             429: APIResponse(description: "Too many failed sign-ins (HTML).", content: [("text/html", .string)], headers: ["Retry-After": "Seconds to wait."])]) { rooms, r, c in
            try await rooms.console.consoleSignIn(r, c)
        },
        Endpoint(method: .post, path: "/console/session/end", access: .open, summary: "Signs out of the console (form: csrf).",
                 requestBody: APIRequestBody(required: false, content: [("application/x-www-form-urlencoded", JSONSchema.type("object").with { $0.properties = ["csrf": .string] })],
                                             description: "The page's CSRF token."),
                 responses: [303: APIResponse(description: "Signed out: to /console, the cookie cleared.", headers: ["Location": "/console"]),
                             403: .problem("The CSRF token is wrong, or the request came from another site.")]) { rooms, r, c in
            try await rooms.console.consoleSignOut(r, c)
        },
        Endpoint(method: .get, path: "/console/api/media", access: .open, summary: "The console's image list, with where each image is used.",
                 responses: [200: .jsonArray(of: ConsoleMediaItem.self, "Newest first, variants left out."),
                             401: .problem("No console session."), 403: .problem("The session is not an admin's.")]) { rooms, r, c in
            try await rooms.console.consoleMediaList(r, c)
        },
        Endpoint(method: .post, path: "/console/api/media", access: .open, summary: "An upload from the console (X-CSRF-Token required).",
                 parameters: [.header("X-CSRF-Token", "The token of the console page.")],
                 requestBody: APIRequestBody(required: true, content: [("application/octet-stream", .binary)], description: "A PNG, JPEG or GIF file."),
                 responses: [201: .json(MediaResponse.self, "Stored."), 200: .json(MediaResponse.self, "Already stored."),
                             401: .problem("No console session."), 403: .problem("Not an admin, no CSRF token, or another site's request."),
                             413: .problem("Over the size limit."), 415: .problem("Not PNG, JPEG or GIF."), 422: .problem("It does not decode.")]) { rooms, r, c in
            try await rooms.console.consoleUpload(r, c)
        },
        Endpoint(method: .get, path: "/console/api/apps", access: .open, summary: "The server's apps, each with its registered devices (docs/api.md#apps-and-api-keys).",
                 responses: [200: .jsonArray(of: ConsoleApp.self, "By name, default included."), 401: .problem("No console session."),
                             403: .problem("The session is not an admin's.")]) { rooms, r, c in
            try await rooms.console.consoleApps(r, c)
        },
        Endpoint(method: .get, path: "/console/api/audience", access: .open,
                 summary: "Who a campaign would reach: everyone, listed users, a tag expression, a saved segment or a filter.",
                 parameters: [.query("users", .string, "User names, comma-separated."), .query("tags", .string, "A tag expression."),
                              .query("segment", ValuePattern.string(ValuePattern.segmentName), "A saved segment's name (docs/api.md#segments)."),
                              .query("filter", .string, "A segment filter, as JSON text (docs/api.md#segments)."),
                              .query("all", .string, "Everyone (the default)."), .query("app", .string, "Only this app's devices.")],
                 responses: [200: .json(ConsoleReach.self, "Users and devices it reaches now, and the listed names that are no user."),
                             400: .problem("The expression, the list or the filter is malformed (in words; a filter's fault starts with its JSON path, filter.all[1].op: …), or the segment named is not one."),
                             422: .problem("No app of that name on this server."),
                             401: .problem("No console session."), 403: .problem("The session is not an admin's.")]) { rooms, r, c in
            try await rooms.console.consoleAudience(r, c)
        },
        Endpoint(method: .get, path: "/console/api/campaigns", access: .open, summary: "The console's campaigns panel: campaigns, newest first, with their counts and schedules.",
                 parameters: [.query("limit", JSONSchema.integer.with { $0.minimum = 1; $0.maximum = 500 }, "At most this many (default 50)."),
                              .query("before", .integer, "Only campaigns with smaller ids (the next page).")],
                 responses: [200: .jsonArray(of: CampaignResponse.self, "As GET /api/admin/campaigns lists them."), 400: .problem("limit is out of range."),
                             401: .problem("No console session."), 403: .problem("The session is not an admin's.")]) { rooms, r, c in
            try await rooms.console.consoleCampaigns(r, c)
        },
        Endpoint(method: .post, path: "/console/api/campaigns", access: .open, summary: "Sends a campaign from the console (X-CSRF-Token required).",
                 parameters: [.header("X-CSRF-Token", "The token of the console page.")],
                 requestBody: APIRequestBody(required: true, content: [("application/json", .ref("CampaignRequest"))], description: "As POST /api/admin/campaigns takes it."),
                 responses: [202: .json(CampaignResponse.self, "Queued.", headers: ["Location": "Its progress."]), 400: .problem("A malformed body."),
                             401: .problem("No console session."), 403: .problem("Not an admin, no CSRF token, or another site's request."),
                             422: .problem("Unknown image or users, or too long for a push.")]) { rooms, r, c in
            try await rooms.console.consoleSend(r, c)
        },
        Endpoint(method: .get, path: "/console/api/campaigns/{id}", access: .open, summary: "A campaign's counts and its failed deliveries' reasons.",
                 parameters: [.path("id", .integer, "The campaign id.")],
                 responses: [200: .json(ConsoleProgress.self, "Counts and failures."), 401: .problem("No console session."),
                             403: .problem("The session is not an admin's."), 404: .problem("No such campaign.")]) { rooms, r, c in
            try await rooms.console.consoleWatch(r, c)
        },
        Endpoint(method: .get, path: "/console/api/campaigns/{id}/stats", access: .open, summary: "A campaign's funnel and timeline, for the console's chart.",
                 parameters: [.path("id", .integer, "The campaign id.")],
                 responses: [200: .json(CampaignStatsResponse.self, "As /api/admin/campaigns/{id}/stats."), 401: .problem("No console session."),
                             403: .problem("The session is not an admin's."), 404: .problem("No such campaign.")]) { rooms, r, c in
            try await rooms.console.consoleStats(r, c)
        },
        Endpoint(method: .delete, path: "/console/api/campaigns/{id}", access: .open, summary: "Cancels a campaign from the console (X-CSRF-Token required).",
                 parameters: [.path("id", .integer, "The campaign id."), .header("X-CSRF-Token", "The token of the console page.")],
                 responses: [200: .json(CampaignResponse.self, "Cancelled."), 401: .problem("No console session."),
                             403: .problem("Not an admin, no CSRF token, or another site's request."), 404: .problem("No such campaign."),
                             409: .problem("The campaign is done.")]) { rooms, r, c in
            try await rooms.console.consoleCancel(r, c)
        },
        Endpoint(method: .patch, path: "/console/api/campaigns/{id}", access: .open,
                 summary: "Changes a sent campaign's words from the console, as PATCH /api/admin/campaigns/{id} does (X-CSRF-Token required).",
                 parameters: [.path("id", .integer, "The campaign id."), .header("X-CSRF-Token", "The token of the console page.")],
                 requestBody: APIRequestBody(required: true, content: [("application/json", .ref("ContentChangeRequest"))],
                                             description: "As PATCH /api/admin/campaigns/{id} takes it: at least one of title, message, payload, content and options; alertAgain (default false) alerts the devices that already got it again."),
                 responses: [200: .json(CampaignChangeResponse.self, "Changed: the inbox entries that now show the new words, the pushes not yet sent that carry them, the replacements sent per platform, and the campaign."),
                             400: .problem("A malformed body, or nothing to change: the detail names the field."), 401: .problem("No console session."),
                             403: .problem("Not an admin, no CSRF token, or another site's request."), 404: .problem("No such campaign."),
                             409: .problem("The campaign was withdrawn."),
                             422: .problem("Unknown image, a template that does not parse, or too long for a push: the detail names the field.")]) { rooms, r, c in
            try await rooms.console.consoleChange(r, c)
        },
        Endpoint(method: .post, path: "/console/api/campaigns/{id}/retract", access: .open,
                 summary: "Withdraws a sent campaign from the console, as POST /api/admin/campaigns/{id}/retract does (X-CSRF-Token required).",
                 parameters: [.path("id", .integer, "The campaign id."), .header("X-CSRF-Token", "The token of the console page.")],
                 requestBody: APIRequestBody(required: false, content: [("application/json", .ref("RetractRequest"))],
                                             description: "{\"retractedText\"}: what browsers show in its place (default \"This message was withdrawn\")."),
                 responses: [200: .json(RetractResponse.self, "Withdrawn: the inboxes it left, the pushes not yet sent that were cancelled, and the background pushes sent per platform."),
                             400: .problem("A malformed body."), 401: .problem("No console session."),
                             403: .problem("Not an admin, no CSRF token, or another site's request."), 404: .problem("No such campaign."),
                             409: .problem("The campaign was already withdrawn.")]) { rooms, r, c in
            try await rooms.console.consoleRetract(r, c)
        },
        Endpoint(method: .get, path: "/console/api/live-activities", access: .open,
                 summary: "The console's Live Activities panel: activities, newest first, as GET /api/live-activities lists them.",
                 parameters: [.query("limit", JSONSchema.integer.with { $0.minimum = 1; $0.maximum = 500 }, "At most this many (default 50).")],
                 responses: [200: .jsonArray(of: LiveActivityResponse.self, "As GET /api/live-activities lists them (without perDevice)."),
                             400: .problem("limit is out of range."), 401: .problem("No console session."),
                             403: .problem("The session is not an admin's.")]) { rooms, r, c in
            try await rooms.console.consoleLiveActivities(r, c)
        },
        Endpoint(method: .post, path: "/console/api/live-activities", access: .open,
                 summary: "Starts a Live Activity from the console, as POST /api/live-activities does (X-CSRF-Token required).",
                 parameters: [.header("X-CSRF-Token", "The token of the console page.")],
                 requestBody: APIRequestBody(required: true, content: [("application/json", .ref("LiveActivityStartRequest"))],
                                             description: "As POST /api/live-activities takes it: audience as a campaign's; alert.title required; broadcast: updates through an APNs broadcast channel (iOS 18)."),
                 responses: [202: .json(LiveActivityQueuedResponse.self, "Started: a start push queued per device (devices: 0 when none has a token for the type).",
                                         headers: ["Location": "The activity in the HTTP API (/api/live-activities/{id})."]),
                             400: .problem("The body, the audience, the type, or attributes or contentState (not a JSON object: named, with where it broke) is not valid."),
                             401: .problem("No console session."), 403: .problem("Not an admin, no CSRF token, or another site's request."),
                             413: .problem("The start push would be over 4 KiB (its size named), or the body is over 64 KiB."),
                             422: .problem("No alert.title (iOS drops a start without an alert), a listed user does not exist, or broadcast on a server that sends no APNs pushes."),
                             503: .problem("APNs did not make the broadcast channel now.", headers: ["Retry-After": "Seconds to wait."])]) { rooms, r, c in
            try await rooms.console.consoleStartActivity(r, c)
        },
        Endpoint(method: .get, path: "/console/api/live-activities/{id}", access: .open,
                 summary: "A Live Activity's state, counts and devices, as GET /api/live-activities/{id} answers it.",
                 parameters: [activityID],
                 responses: [200: .json(LiveActivityResponse.self, "The activity, each device with its last push."), 401: .problem("No console session."),
                             403: .problem("The session is not an admin's."), 404: .problem("No such activity.")]) { rooms, r, c in
            try await rooms.console.consoleShowActivity(r, c)
        },
        Endpoint(method: .patch, path: "/console/api/live-activities/{id}", access: .open,
                 summary: "Updates a Live Activity on every device from the console, as PATCH /api/live-activities/{id} does (X-CSRF-Token required).",
                 parameters: [activityID, .header("X-CSRF-Token", "The token of the console page.")],
                 requestBody: APIRequestBody(required: true, content: [("application/json", .ref("LiveActivityChangeRequest"))],
                                             description: "As PATCH /api/live-activities/{id} takes it: contentState required; alert, staleDate and priority (5 or 10) optional."),
                 responses: [202: .json(LiveActivityQueuedResponse.self, "Queued: a push per device, or one broadcast."),
                             400: .problem("The body is not valid, has no contentState, or priority is not 5 or 10."), 401: .problem("No console session."),
                             403: .problem("Not an admin, no CSRF token, or another site's request."), 404: .problem("No such activity."),
                             409: .problem("It ended, or started over 8 hours ago (iOS ended it)."),
                             413: .problem("The update push would be over 4 KiB, or the body is over 64 KiB.")]) { rooms, r, c in
            try await rooms.console.consoleUpdateActivity(r, c)
        },
        Endpoint(method: .delete, path: "/console/api/live-activities/{id}", access: .open,
                 summary: "Ends a Live Activity on every device from the console, as DELETE /api/live-activities/{id} does (X-CSRF-Token required).",
                 parameters: [activityID, .header("X-CSRF-Token", "The token of the console page.")],
                 requestBody: APIRequestBody(required: false, content: [("application/json", .ref("LiveActivityChangeRequest"))],
                                             description: "Optional: contentState (the last shown) and dismissAt."),
                 responses: [202: .json(LiveActivityQueuedResponse.self, "Ending: an end push per device, or one broadcast."),
                             400: .problem("The body is not valid."), 401: .problem("No console session."),
                             403: .problem("Not an admin, no CSRF token, or another site's request."), 404: .problem("No such activity."),
                             409: .problem("It has already ended."),
                             413: .problem("The end push would be over 4 KiB, or the body is over 64 KiB.")]) { rooms, r, c in
            try await rooms.console.consoleEndActivity(r, c)
        },
        Endpoint(method: .get, path: "/console/api/users", access: .open, summary: "Users whose name contains q, with their device counts.",
                 parameters: [.query("q", .string, "Part of a name (any case).")],
                 responses: [200: .jsonArray(of: ConsoleUser.self, "By name, at most 200."), 401: .problem("No console session."),
                             403: .problem("The session is not an admin's.")]) { rooms, r, c in
            try await rooms.console.consoleUsers(r, c)
        },
        Endpoint(method: .get, path: "/console/api/users/{name}", access: .open, summary: "A user's devices and last ten pushes.",
                 parameters: [.path("name", .string, "The user name.")],
                 responses: [200: .json(ConsoleUserDetail.self, "Devices and pushes."), 401: .problem("No console session."),
                             403: .problem("The session is not an admin's."), 404: .problem("No such user.")]) { rooms, r, c in
            try await rooms.console.consoleUser(r, c)
        },
        Endpoint(method: .delete, path: "/console/api/registrations/{id}", access: .open, summary: "Removes a user's device (X-CSRF-Token required).",
                 parameters: [.path("id", .string, "The registration id."), .query("user", .string, "Its owner."),
                              .header("X-CSRF-Token", "The token of the console page.")],
                 responses: [200: .json(RegistrationDeleted.self, "Removed."), 400: .problem("No ?user=."), 401: .problem("No console session."),
                             403: .problem("Not an admin, no CSRF token, or another site's request."),
                             404: .problem("No such registration for that user."), 410: .problem("It was already removed or expired.")]) { rooms, r, c in
            try await rooms.console.consoleRemoveDevice(r, c)
        },
        Endpoint(method: .get, path: "/console/api/segments", access: .open, summary: "The saved segments, for the console's audience choice.",
                 responses: [200: .json(SegmentsResponse.self, "As GET /api/admin/segments lists them, by name."), 401: .problem("No console session."),
                             403: .problem("The session is not an admin's.")]) { rooms, r, c in
            try await rooms.console.consoleSegments(r, c)
        },
        Endpoint(method: .put, path: "/console/api/segments/{name}", access: .open, summary: "Saves the console's filter as a segment (X-CSRF-Token required).",
                 parameters: [.path("name", ValuePattern.string(ValuePattern.segmentName), "1 to 64 of A-Z a-z 0-9 _ . -."),
                              .header("X-CSRF-Token", "The token of the console page.")],
                 requestBody: APIRequestBody(required: true, content: [("application/json", .ref("SegmentBody"))], description: "As PUT /api/admin/segments/{name} takes it: {\"filter\":F}."),
                 responses: [200: .json(SegmentResponse.self, "The segment as saved (one of that name is replaced)."),
                             400: .problem("The name, the body or the filter is not valid: the detail starts with the filter's JSON path."),
                             401: .problem("No console session."), 403: .problem("Not an admin, no CSRF token, or another site's request."),
                             413: .problem("The body is over 64 KiB.")]) { rooms, r, c in
            try await rooms.console.consoleSaveSegment(r, c)
        },
        Endpoint(method: .post, path: "/console/api/preview", access: .open,
                 summary: "A campaign's title, message and subtitle rendered for one user, as the campaign's templates would render them (X-CSRF-Token required).",
                 parameters: [.header("X-CSRF-Token", "The token of the console page.")],
                 requestBody: APIRequestBody(required: true, content: [("application/json", .ref("ConsolePreviewRequest"))],
                                             description: "{\"user\",\"title\",\"message\",\"options\":{\"subtitle\"}}: the words as a campaign takes them."),
                 responses: [200: .json(ConsolePreview.self, "The words rendered for that user (campaign.id is 0)."), 400: .problem("A malformed body."),
                             401: .problem("No console session."), 403: .problem("Not an admin, no CSRF token, or another site's request."),
                             404: .problem("No such user."), 422: .problem("A template does not parse: the detail names the field and where, as POST /api/admin/campaigns does.")]) { rooms, r, c in
            try await rooms.console.consolePreview(r, c)
        },
        Endpoint(method: .get, path: "/console/api/audit", access: .open,
                 summary: "The console's Audit log panel: who changed what, newest first, as GET /api/admin/audit answers it.",
                 parameters: [.query("actor", .string, "Only this actor's."), .query("action", .string, "Only this action, or every action of a kind (campaign)."),
                              .query("since", JSONSchema.integer.with { $0.minimum = 0; $0.maximum = 100_000_000_000 }, "Only entries since then (seconds since 1970)."),
                              .query("limit", JSONSchema.integer.with { $0.minimum = 1; $0.maximum = 500 }, "At most this many (default 50)."),
                              .query("before", .integer, "Only entries with smaller ids (the next page).")],
                 responses: [200: .jsonArray(of: AuditEntryResponse.self, "As GET /api/admin/audit lists them."),
                             400: .problem("since, limit or before is not valid."), 401: .problem("No console session."),
                             403: .problem("The session is not an admin's.")]) { rooms, r, c in
            try await rooms.console.consoleAudit(r, c)
        },
        Endpoint(method: .get, path: "/console/media/{sha256}", access: .open, summary: "An image for the console's grid (the session cookie instead of credentials).",
                 parameters: imageParameters(.path("sha256", mediaID, "The media id."), variants: true),
                 responses: imageResponses(notFound: "No such media.", variants: true).merging([401: .problem("No console session."),
                                                                                                403: .problem("The session is not an admin's.")]) { a, _ in a }) { rooms, r, c in
            try await rooms.console.consoleImage(r, c)
        },
    ]
}
