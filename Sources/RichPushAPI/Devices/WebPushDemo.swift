import Foundation
import HTTPTypes
import Hummingbird

/// `/webpush-demo` and its service worker (docs/delivery.md#android-fcm-http-v1-and-browsers-web-push): a page where a browser subscribes with the
/// server's VAPID key and registers the subscription for an account, then shows what arrives.
/// No build step and no CDN: the page and the worker are two files, `Pages/webpush-demo.html`
/// and `Pages/webpush-sw.js`, served as they are (nothing is filled in).
enum WebPushDemo {
    static let page = PageFile.text("webpush-demo", "html")

    static let serviceWorker = PageFile.text("webpush-sw", "js")

    static func response(_ text: String, contentType: String) -> Response {
        let buffer = ByteBuffer(string: text)
        return Response(status: .ok, headers: [.contentType: contentType, .contentLength: String(buffer.readableBytes),
                                              .cacheControl: "no-cache", HTTPField.Name("Content-Security-Policy")!: "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'unsafe-inline'"],
                        body: .init(byteBuffer: buffer))
    }
}
