import Foundation
@testable import RichPushAPI
import RichPushTestSupport
import Testing

/// deploy/grafana's dashboard (docs/operations.md#metrics) charts only metrics the server exports,
/// and every counter of this wave (part four) has a panel.
@Suite("The Grafana dashboard")
struct DashboardTests {
    @Test("every metric a panel queries is one /metrics serves with its HELP; Live Activity pushes and held-back pushes have panels")
    func panelsQueryServedMetrics() throws {
        let file = Fixtures.packageRoot.appendingPathComponent("deploy/grafana/dashboards/richpush.json")
        let dashboard = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [String: Any])
        let panels = try #require(dashboard["panels"] as? [[String: Any]])
        let expressions = panels.flatMap { ($0["targets"] as? [[String: Any]] ?? []).compactMap { $0["expr"] as? String } }
        let pattern = try Regex(#"\b(richpush_[a-z0-9_]+|http_server_[a-z0-9_]+)"#)
        var queried = Set<String>()
        for expression in expressions {
            for match in expression.matches(of: pattern) {
                var name = String(expression[match.range])
                for suffix in ["_bucket", "_sum", "_count"] where name.hasSuffix(suffix) && MetricCatalog.help[name] == nil {
                    name.removeLast(suffix.count)
                }
                queried.insert(name)
            }
        }
        #expect(!queried.isEmpty)
        for name in queried.sorted() { #expect(MetricCatalog.help[name] != nil, "\(name) is charted but not served") }
        #expect(queried.isSuperset(of: ["richpush_live_activity_pushes_total", "richpush_held_back_pushes_total"]))
    }
}
