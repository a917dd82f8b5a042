import ArgumentParser
import Foundation
import MediaStore
import RichPushCore

/// `richpush migrate --to-database URL --to-blobs URL` (docs/operations.md#more-than-one-node): copies the store the usual
/// flags name into another, typically from the embedded store to PostgreSQL and a bucket.
struct MigrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Copy everything from this store (--data, --database, --blobs) into another, checking every blob's hash; run it again to finish an interrupted copy.")

    @OptionGroup var dataOptions: DataOptions
    @Option(help: ArgumentHelp("The target's database: postgres://USER:PASSWORD@HOST[:PORT]/DB or sqlite:PATH.", valueName: "url"))
    var toDatabase: String
    @Option(help: ArgumentHelp("The target's blobs: s3://BUCKET[/PREFIX]?endpoint=URL (credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY).",
                               valueName: "url"))
    var toBlobs: String
    @Option(help: "A data directory for the target's temp files and, with sqlite: or file: targets, its files (default: <data>/migrate-target).")
    var toData: String?

    func validate() throws {
        do { _ = try DatabaseLocation(toDatabase) } catch let error as DatabaseConfigurationError {
            throw ValidationError(error.description.replacingOccurrences(of: "--database", with: "--to-database"))
        }
        do {
            if case .s3 = try BlobsLocation(toBlobs, dataPath: targetData) { _ = try S3Credentials.fromEnvironment() }
        } catch let error as S3Error {
            throw ValidationError(error.description.replacingOccurrences(of: "--blobs", with: "--to-blobs"))
        }
        if dataOptions.database == toDatabase && dataOptions.blobs == toBlobs {
            throw ValidationError("the target is the store itself: give --to-database and --to-blobs of another store")
        }
    }

    private var targetData: String { toData ?? "\(dataOptions.data)/migrate-target" }

    func run() async throws {
        let source = try await dataOptions.open()
        defer { source.close() }
        let target = try await DataStore.open(path: targetData, database: toDatabase, blobs: toBlobs)
        defer { target.close() }
        let report = try await source.copy(to: target) { Terminal.error("migrate: \($0)") }
        let rows = report.rows.map { "\($0.table) \($0.copied)" }.joined(separator: ", ")
        print("copied \(counted(report.blobsCopied, "blob")) (\(report.blobsPresent) already there); rows: \(rows)")
        for problem in report.blobProblems { Terminal.error("error: blob \(problem)") }
        if !report.blobProblems.isEmpty {
            Terminal.error("\(counted(report.blobProblems.count, "blob")) \(report.blobProblems.count == 1 ? "was" : "were") not copied; the rows that use them were (fix the source and run migrate again)")
            throw ExitCode(1)
        }
    }
}
