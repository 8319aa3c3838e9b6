//! What makes `okeanos` fit a Linux system: the mount(8) helper (`mount -t fuse.okeanos`, an
//! /etc/fstab line), shell completions and a man page generated from the CLI, and
//! `okeanos install-helpers`, which puts them where the system looks.
//!
//! mount(8) runs `/sbin/mount.fuse.okeanos SOURCE TARGET [-sfnv] [-o OPTIONS]` for type
//! `fuse.okeanos` (and `/sbin/mount.okeanos` for type `okeanos`). The same binary answers to
//! those names (installed as symlinks): it drops the options that only mean something to
//! mount(8) and fstab, then mounts as `okeanos mount` does (a daemon, returning once mounted).

use clap::CommandFactory;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The names mount(8) calls the helper by.
pub const HELPER_NAMES: [&str; 2] = ["mount.fuse.okeanos", "mount.okeanos"];

/// Options that belong to mount(8) or fstab, not to the file system: dropped.
fn fstab_only(opt: &str) -> bool {
    let key = opt.split('=').next().unwrap_or(opt);
    matches!(
        key,
        "defaults" | "auto" | "noauto" | "user" | "users" | "nouser" | "owner" | "group" | "_netdev" | "nofail" | "rw" | "comment" | "dev" | "nodev" | "suid" | "nosuid" | "exec" | "noexec" | "atime" | "noatime" | "relatime" | "strictatime" | "lazytime" | "loop" | "sync" | "async"
    ) || key.starts_with("x-")
}

/// The mount(8) helper: `mount.fuse.okeanos SOURCE TARGET [-sfnvN] [-o OPTS] [-t TYPE]`.
pub fn mount_helper(args: &[String]) -> Result<ExitCode, String> {
    let mut positional = Vec::new();
    let mut options = Vec::new();
    let mut fake = false;
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        match a.as_str() {
            "-o" => {
                i += 1;
                let o = args.get(i).ok_or("-o needs options")?;
                options.extend(o.split(',').map(str::trim).filter(|s| !s.is_empty() && !fstab_only(s)).map(String::from));
            }
            "-t" => i += 1, // the type: ours
            "-f" => fake = true,
            "-s" | "-n" | "-v" | "-N" => {}
            s if s.starts_with("-o") => options.extend(s[2..].split(',').filter(|s| !s.is_empty() && !fstab_only(s)).map(String::from)),
            s if s.starts_with('-') && s.len() > 1 => {
                fake |= s.contains('f');
            }
            _ => positional.push(a.clone()),
        }
        i += 1;
    }
    let [source, target] = positional.as_slice() else {
        return Err(format!("usage: {} IMAGE MOUNTPOINT [-o OPTIONS] (as mount(8) calls it)", HELPER_NAMES[0]));
    };
    // mount(8) may hand the source over as fuse.okeanos#IMAGE (the old fuse fstab syntax).
    let source = source.rsplit_once('#').map_or(source.as_str(), |(_, s)| s);
    if fake {
        return Ok(ExitCode::SUCCESS);
    }
    crate::mount::mount(Path::new(source), Path::new(target), &options.join(","), false, None)
}

/// Shell completions for `shell` on stdout.
pub fn completions(shell: clap_complete::Shell) -> Result<ExitCode, String> {
    let mut cmd = crate::Cli::command();
    clap_complete::generate(shell, &mut cmd, "okeanos", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}

/// The man page (roff) on stdout.
/// The man page, in section 8 (system administration: mkfs, fsck and mount helpers live
/// there), as `okeanos man` prints it and install-helpers installs it.
fn man_page() -> std::io::Result<Vec<u8>> {
    let mut v = Vec::new();
    clap_mangen::Man::new(crate::Cli::command()).section("8").render(&mut v)?;
    Ok(v)
}

pub fn man() -> Result<ExitCode, String> {
    use std::io::Write;
    std::io::stdout().write_all(&man_page().map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    Ok(ExitCode::SUCCESS)
}

/// Installs the mount(8) helpers (symlinks to this binary), bash and zsh completions and the
/// man page under `root` (default /). Prints what it did.
pub fn install(root: &Path, bin: Option<PathBuf>) -> Result<ExitCode, String> {
    let exe = match bin {
        Some(b) if !b.is_absolute() => return Err(format!("--bin {}: give the absolute path the binary has on the installed system", b.display())),
        Some(b) => b,
        None if root != Path::new("/") => PathBuf::from("/usr/bin/okeanos"),
        None => std::env::current_exe().and_then(|e| e.canonicalize()).map_err(|e| format!("this binary: {e}"))?,
    };
    let put = |rel: &str, write: &dyn Fn(&Path) -> std::io::Result<()>| -> Result<PathBuf, String> {
        let p = root.join(rel);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
        }
        write(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        println!("installed {}", p.display());
        Ok(p)
    };
    for name in HELPER_NAMES {
        put(&format!("sbin/{name}"), &|p| {
            let _ = std::fs::remove_file(p);
            std::os::unix::fs::symlink(&exe, p)
        })?;
    }
    let render = |shell: clap_complete::Shell| {
        let mut v = Vec::new();
        clap_complete::generate(shell, &mut crate::Cli::command(), "okeanos", &mut v);
        v
    };
    put("usr/share/bash-completion/completions/okeanos", &|p| std::fs::write(p, render(clap_complete::Shell::Bash)))?;
    put("usr/share/zsh/vendor-completions/_okeanos", &|p| std::fs::write(p, render(clap_complete::Shell::Zsh)))?;
    put("usr/share/man/man8/okeanos.8", &|p| std::fs::write(p, man_page()?))?;
    println!("mount with: mount -t fuse.okeanos IMAGE MOUNTPOINT -o data=wasteless,dmeta");
    println!("or in /etc/fstab: /path/to/image.okfs /mnt/okeanos fuse.okeanos data=wasteless,dmeta,nofail 0 0");
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::fstab_only;

    #[test]
    fn fstab_options_are_told_from_file_system_options() {
        for o in ["defaults", "noauto", "nofail", "x-systemd.automount", "_netdev", "user", "rw", "relatime", "comment=x"] {
            assert!(fstab_only(o), "{o}");
        }
        for o in ["data=wasteless", "dmeta", "ro", "commit=1", "allow_other", "errors=remount-ro"] {
            assert!(!fstab_only(o), "{o}");
        }
    }
}
