import HTTPTypes
import Hummingbird
import Telemetry

/// A server span per request the router answers (docs/operations.md#traces), when tracing is on:
/// a child of the caller's W3C `traceparent` when it sends one, named by the route's template
/// (`POST /api/admin/campaigns`), never by its path or query (a payload URL's token, a name a
/// user typed), with the method, the route, the client and the status. Off, it is one branch.
struct RequestTracingMiddleware: RouterMiddleware {
    func handle(_ request: Request, context: AppRequestContext, next: (Request, AppRequestContext) async throws -> Response) async throws -> Response {
        guard Telemetry.isTracing else { return try await next(request, context) }
        var parent = ServiceContext.current ?? .topLevel
        InstrumentationSystem.instrument.extract(request.headers, into: &parent, using: HeadersExtractor())
        let span = startSpan("\(request.method.rawValue) route not found", context: parent, ofKind: .server)
        span.attributes["http.request.method"] = request.method.rawValue
        if let client = context.clientAddress { span.attributes["client.address"] = client }
        defer { span.end() }
        do {
            let response = try await ServiceContext.$current.withValue(span.context) { try await next(request, context) }
            Self.finish(span, context: context, method: request.method, status: response.status.code)
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            Self.finish(span, context: context, method: request.method, status: status)
            if status >= 500 { span.recordError(error) }
            throw error
        }
    }

    private static func finish(_ span: any Span, context: AppRequestContext, method: HTTPRequest.Method, status: Int) {
        if let route = context.endpointPath {
            span.operationName = "\(method.rawValue) \(route)"
            span.attributes["http.route"] = route
        }
        span.attributes["http.response.status_code"] = status
        if status >= 500 { span.setStatus(SpanStatus(code: .error)) }
    }
}

/// `traceparent` and `tracestate` read from a request's headers.
private struct HeadersExtractor: Extractor {
    func extract(key: String, from headers: HTTPFields) -> String? {
        HTTPField.Name(key).flatMap { headers[$0] }
    }
}
