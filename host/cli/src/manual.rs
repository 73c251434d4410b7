//! `wasmprov man`: manual pages from the command definition (clap_mangen),
//! with each command's after-help text as the sections a manual has
//! (`EXAMPLES`, `EXIT STATUS`) instead of one `EXTRA` paragraph.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

/// The manual page of `cmd` (roff).
pub(crate) fn page(cmd: clap::Command) -> Result<String> {
    let mut roff = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut roff)?;
    Ok(sections(&String::from_utf8(roff)?))
}

/// Writes `wasmprov.1` and a page per command (`wasmprov-price.1`, ...;
/// `wasmprov-fake-hetzner.1` for nested ones) into `dir`; their paths.
pub(crate) fn write_pages(cmd: clap::Command, dir: &Path) -> Result<Vec<PathBuf>> {
    fn each(cmd: clap::Command, dir: &Path, written: &mut Vec<PathBuf>) -> Result<()> {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            each(sub.clone(), dir, written)?;
        }
        let name = clap_mangen::Man::new(cmd.clone()).get_filename();
        let path = dir.join(name);
        let mut file =
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        file.write_all(page(cmd)?.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
        Ok(())
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    // As clap_mangen's own generate_to: full names (`wasmprov-price`), and
    // no page for the `help` pseudo-command.
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut written = Vec::new();
    each(cmd, dir, &mut written)?;
    written.reverse();
    Ok(written)
}

/// Replaces the `.SH EXTRA` section (the after-help text, already escaped)
/// by one section per `Heading:` line in it, its lines kept as written.
fn sections(roff: &str) -> String {
    let Some(start) = roff.find(".SH EXTRA\n") else {
        return roff.to_string();
    };
    let body_start = start + ".SH EXTRA\n".len();
    let end = roff[body_start..]
        .find("\n.SH ")
        .map_or(roff.len(), |i| body_start + i + 1);
    let mut out = roff[..start].to_string();
    let mut open = false;
    for line in roff[body_start..end].lines() {
        let heading = line
            .strip_suffix(':')
            .filter(|h| !h.starts_with(' ') && !h.is_empty());
        if let Some(h) = heading {
            if open {
                out.push_str(".fi\n");
            }
            let title = match h {
                "Exit codes" => "EXIT STATUS".to_string(),
                other => other.to_uppercase(),
            };
            out.push_str(&format!(".SH \"{title}\"\n.nf\n"));
            open = true;
        } else {
            if !open {
                out.push_str(".SH NOTES\n.nf\n");
                open = true;
            }
            out.push_str(line);
            out.push('\n');
        }
    }
    if open {
        out.push_str(".fi\n");
    }
    out.push_str(&roff[end..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_help_becomes_sections() {
        let roff = ".TH x 1\n.SH EXTRA\nExamples:\n  x \\-\\-y\n\nExit codes:\n  0   ok\n.SH VERSION\nv1\n";
        let out = sections(roff);
        assert_eq!(
            out,
            ".TH x 1\n.SH \"EXAMPLES\"\n.nf\n  x \\-\\-y\n\n.fi\n.SH \"EXIT STATUS\"\n.nf\n  0   ok\n.fi\n.SH VERSION\nv1\n"
        );
        assert_eq!(sections(".TH x 1\n"), ".TH x 1\n");
    }
}
