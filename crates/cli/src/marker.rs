//! Reads the build marker out of an agent library's bytes. Shared by
//! build.rs (which names the embedded agent's build at compile time) and
//! the CLI (which recognises the agent another vmview loaded into a JVM),
//! so both read it the same way. The agent writes the marker as one string
//! literal, `vmview-agent-build VERSION+ID` (the agent's `BUILD_MARKER`).

/// The marker before `VERSION+ID`.
const MARKER: &[u8] = b"vmview-agent-build ";

/// `VERSION+ID` from a vmview agent's bytes: the first occurrence of the
/// marker followed by a version, `+` and 16 hex digits (string literals lie
/// back to back in a library, so the id's length, not a terminator, ends
/// it). `None` for a library without one (not a vmview agent, or one
/// older than build ids).
pub fn build_in(bytes: &[u8]) -> Option<String> {
    let mut from = 0;
    while let Some(at) = bytes[from..]
        .windows(MARKER.len())
        .position(|w| w == MARKER)
    {
        let start = from + at + MARKER.len();
        from = start;
        let rest = &bytes[start..bytes.len().min(start + 80)];
        let Some(plus) = rest.iter().position(|&b| b == b'+') else {
            continue;
        };
        let version = &rest[..plus];
        let version_ok = !version.is_empty()
            && version
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || b".-".contains(b));
        match rest.get(plus + 1..plus + 17) {
            Some(id) if version_ok && id.iter().all(u8::is_ascii_hexdigit) => {
                return Some(format!(
                    "{}+{}",
                    String::from_utf8_lossy(version),
                    String::from_utf8_lossy(id)
                ))
            }
            _ => continue,
        }
    }
    None
}
