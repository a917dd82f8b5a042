import CoreMetrics

/// The edge's own counters (their names and help texts are in the server's metric catalog).
enum EdgeMetric {
    static let memoryAnswersHTTP1 = Counter(label: "richpush_memory_answers_total", dimensions: [("protocol", "http/1.1")])
    static let memoryAnswersH2 = Counter(label: "richpush_memory_answers_total", dimensions: [("protocol", "h2")])
    static let frameAnswersH2 = Counter(label: "richpush_h2_frame_answers_total")
    static let frontHandOffs = Counter(label: "richpush_http1_handoffs_total")
}
