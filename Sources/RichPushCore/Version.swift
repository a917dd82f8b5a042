/// This build of RichPush.
public enum RichPushBuild {
    /// The release version, as `richpush --version` prints it (and, later, `richpush_build_info`).
    public static let version = "0.5.0"
}
