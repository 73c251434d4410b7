//! `wasmprov declare COMPONENT`: embeds a plugin's `capabilities.toml` in a
//! component built by another language's tools (componentize-py,
//! ComponentizeJS), as `export_provider!(T, capabilities = ...)` does for
//! Rust, so `wasmprov install` and `inspect` see what it needs.

use std::path::Path;

use anyhow::{Context as _, Result, bail};
use wasmprov_host::policy::requests::{self, SECTION};

/// Declares `capabilities` in `component`, writing the result to `out`
/// (the component itself when `None`). Returns whether anything changed.
///
/// # Errors
/// An unreadable file, a declaration that does not parse, or a component
/// that already declares something else.
pub fn declare(component: &Path, capabilities: &Path, out: Option<&Path>) -> Result<bool> {
    let bytes =
        std::fs::read(component).with_context(|| format!("reading {}", component.display()))?;
    if !bytes.starts_with(b"\0asm") {
        bail!("{} is not a WebAssembly file", component.display());
    }
    let text = std::fs::read_to_string(capabilities)
        .with_context(|| format!("reading {}", capabilities.display()))?;
    let target = out.unwrap_or(component);
    match wasmprov_host::custom_section(&bytes, SECTION) {
        Some(existing) if existing == text => {
            if target != component {
                std::fs::write(target, &bytes)
                    .with_context(|| format!("writing {}", target.display()))?;
            }
            return Ok(false);
        }
        Some(_) => bail!(
            "{} already declares other capabilities; declare them in a fresh build",
            component.display()
        ),
        None => {}
    }
    let declared = requests::embed(&bytes, &text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", capabilities.display()))?;
    let tmp = target.with_extension("wasm.declaring");
    std::fs::write(&tmp, &declared).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, target).with_context(|| format!("replacing {}", target.display()))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest component: the preamble of the component binary format.
    const EMPTY_COMPONENT: &[u8] = b"\0asm\x0d\x00\x01\x00";

    #[test]
    fn the_declaration_lands_in_the_section_the_host_reads() {
        let dir = tempfile::tempdir().unwrap();
        let wasm = dir.path().join("p.wasm");
        let caps = dir.path().join("capabilities.toml");
        std::fs::write(&wasm, EMPTY_COMPONENT).unwrap();
        let text = "[secrets.token]\nwhy = \"an API token\"\n";
        std::fs::write(&caps, text).unwrap();
        assert!(declare(&wasm, &caps, None).unwrap());
        let bytes = std::fs::read(&wasm).unwrap();
        assert_eq!(
            wasmprov_host::custom_section(&bytes, SECTION).as_deref(),
            Some(text)
        );
        wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
            .validate_all(&bytes)
            .expect("still a valid component");
        // Again with the same text: nothing to do; with other text: refused.
        assert!(!declare(&wasm, &caps, None).unwrap());
        std::fs::write(&caps, "[secrets.other]\nwhy = \"x\"\n").unwrap();
        let e = declare(&wasm, &caps, None).unwrap_err().to_string();
        assert!(e.contains("already declares"), "{e}");
        // A declaration that does not parse is refused before anything is written.
        std::fs::write(dir.path().join("q.wasm"), EMPTY_COMPONENT).unwrap();
        std::fs::write(&caps, "[[http]]\nurl = \"ftp://x\"\nwhy = \"x\"\n").unwrap();
        assert!(declare(&dir.path().join("q.wasm"), &caps, None).is_err());
        assert_eq!(
            std::fs::read(dir.path().join("q.wasm")).unwrap(),
            EMPTY_COMPONENT
        );
    }
}
