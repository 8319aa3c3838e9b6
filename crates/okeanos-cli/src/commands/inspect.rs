//! `okeanos stat` and `okeanos journal dump`: what an image holds and what its journal says,
//! without mounting it for writing.

use crate::*;

/// The readable form of an nvm journal's table.
fn nvm_summary(t: &okeanos::inspect::NvmTable) -> String {
    let a = &t.analysis;
    format!(
        "journal         nvm {} ({} slots of {} bytes; durable against {}), commit word {}: {} frozen copies to write home, {} clean, {} tombstones, {} above the commit word, {} torn{}",
        t.path,
        t.header.slots,
        t.header.block_size,
        t.durability.describe(),
        t.commit_word,
        a.frozen,
        a.clean,
        a.tombstones,
        a.uncommitted,
        a.invalid,
        if a.needs_recovery() { " (needs recovery)" } else { "" }
    )
}

pub(crate) fn journal_dump(dev: Arc<dyn Device>, jdev: Option<Arc<dyn Device>>) -> Result<ExitCode, String> {
    if let Some(t) = okeanos::inspect::nvm_table(&dev).map_err(|e| e.to_string())? {
        outln!("{}", nvm_summary(&t));
        for c in &t.analysis.replay {
            outln!("  block {}: newest committed copy in slot {}", c.block, c.slot);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let d = okeanos::inspect::dump_journal(dev, jdev).map_err(|e| e.to_string())?;
    outln!("journal: {}", d.state.summary);
    if d.state.kind != "manylogs" {
        outln!("ring: {} blocks ({}), start {}, sequence {}", d.jsb.total_blocks, d.region.name(), d.jsb.start, d.jsb.sequence);
    }
    use okeanos::format::journal::tag_flags;
    use okeanos::journal::recovery::ScanItem;
    for (t, rev) in d.transactions.iter().zip(&d.revoked) {
        let full = t.items.iter().filter(|i| matches!(i, ScanItem::Full { .. })).count();
        let notes = t.items.iter().filter(|i| matches!(i, ScanItem::Note { .. })).count();
        let in_place = t.items.iter().filter(|i| matches!(i, ScanItem::InPlace { .. })).count();
        let meta = t.items.iter().filter(|i| i.tag().is_metadata()).count();
        let beside = if in_place > 0 { format!(", {in_place} new blocks in place") } else { String::new() };
        outln!(
            "transaction {}: log blocks {}..{}, {} handles, {} whole blocks, {} records, {} inode notes, {} metadata, {} revoked{beside}",
            t.tid, t.start, t.end, t.handle_count, full, t.items.len() - full - notes - in_place, notes, meta, rev.len()
        );
        for item in &t.items {
            let g = item.tag();
            let kind = if g.is_metadata() { "metadata" } else { "data" };
            let mut flags = String::new();
            if g.flags & tag_flags::ESCAPED != 0 {
                flags.push_str(" escaped");
            }
            if g.flags & tag_flags::FRESH != 0 {
                flags.push_str(" fresh");
            }
            match item {
                ScanItem::Full { pos, .. } => outln!("  log {pos:>8} -> block {:>10}  {kind} whole block{flags}", g.fs_block),
                ScanItem::Record { bytes, .. } => outln!("  record     -> block {:>10}  {kind} {} bytes at {}{flags}", g.fs_block, bytes.len(), g.offset),
                ScanItem::Note { note, time_ns, .. } => outln!("  note       -> block {:>10}  inode {} at {}: size {}, mtime and ctime {time_ns}", g.fs_block, note.ino, g.offset, note.size),
                ScanItem::InPlace { .. } => outln!("  in place   -> block {:>10}  {kind} new block written beside the commit, hash {:08x}", g.fs_block, g.data_hash),
            }
        }
        for b in rev {
            outln!("  revoke block {b}");
        }
    }
    outln!("end of log: {}", d.end_reason);
    if let Some(dmg) = &d.damage {
        outln!("DAMAGE: {dmg}");
    }
    Ok(ExitCode::SUCCESS)
}

/// What a checkpoint did, for people or as JSON.
pub(crate) fn print_checkpoint(c: &okeanos::stats::CheckpointCounts, json: bool) {
    if json {
        println!("{}", serde_json::to_string_pretty(c).unwrap_or_default());
        return;
    }
    println!("checkpoint: {} blocks written home in {} device writes ({} copied from logs)", c.blocks, c.runs, c.copied);
    println!("skipped: {} logged copies of the released transactions (superseded by newer copies, or freed)", c.skipped);
}

pub(crate) fn stat(img: &ImageArg, dev: Arc<dyn Device>, jdev: Option<Arc<dyn Device>>, json: bool) -> Result<ExitCode, String> {
    let (sb, gdt, jsb, js) = okeanos::inspect::describe(dev.clone(), jdev).map_err(|e| e.to_string())?;
    let free_blocks: u64 = gdt.iter().map(|g| g.free_blocks as u64).sum();
    let free_inodes: u64 = gdt.iter().map(|g| g.free_inodes as u64).sum();
    let st = state::describe(sb.state);
    let jblocks = match sb.journal {
        JournalLocation::Internal { blocks, .. } | JournalLocation::External { blocks, .. } => blocks,
    };
    let in_use = okeanos::device::lock::holder(&img.image);
    if json {
        let v = serde_json::json!({
            "block_size": sb.block_size, "blocks": sb.block_count, "blocks_free": free_blocks,
            "inodes": sb.inode_count, "inodes_free": free_inodes, "groups": sb.group_count,
            "state": st, "errors": sb.state & state::ERRORS != 0, "error": sb.error, "in_use_by": in_use,
            "mount_count": sb.mount_count, "journal": js.kind, "journal_blocks": jblocks, "journal_state": js.summary,
            "journal_clean": !js.needs_recovery && js.problem.is_none(), "journal_features": okeanos::format::journal::jfeature::names(jsb.features), "mkfs_time_ns": sb.mkfs_time_ns, "journal_sequence": js.next_tid,
            "remote_server": js.remote.as_ref().map(|r| r.server.clone()),
            "remote_fallen_back": js.remote.as_ref().map(|r| r.fallen_back), "remote_epoch": js.remote.as_ref().map(|r| r.epoch),
            "lifetime": sb.lifetime, "lifetime_as_of": "the last clean unmount",
        });
        outln!("{v:#}");
        return Ok(ExitCode::SUCCESS);
    }
    outln!("block size      {}", sb.block_size);
    outln!("blocks          {} ({} free)", sb.block_count, free_blocks);
    outln!("inodes          {} ({} free)", sb.inode_count, free_inodes);
    outln!("groups          {} of {} blocks, {} inodes", sb.group_count, sb.blocks_per_group, sb.inodes_per_group);
    outln!("state           {st}, mounted {}", plural(sb.mount_count as u64, "time", "times"));
    if sb.error.tid != okeanos::Tid::ZERO {
        outln!("error           journal transaction {} damaged, {} after it not replayed", sb.error.tid, plural(sb.error.following, "transaction", "transactions"));
    }
    if let Some(h) = &in_use {
        outln!("in use by       {h}");
    }
    if js.kind == "nvm" {
        match okeanos::inspect::nvm_table(&dev) {
            Ok(Some(t)) => outln!("{}", nvm_summary(&t)),
            Ok(None) => {}
            Err(e) => outln!("journal         nvm: {e}"),
        }
    } else {
        outln!("journal         {}", js.summary);
    }
    outln!("journal features {}", okeanos::format::journal::jfeature::names(jsb.features).join(" "));
    if let Some(r) = &js.remote {
        outln!("remote journal  {}", r.describe());
    }
    let l = &sb.lifetime;
    // Kept in the superblock at each clean unmount: a mount that crashed is not counted.
    let crashed = if js.needs_recovery || sb.state & state::CLEAN == 0 { ", not counting the mount that did not unmount cleanly" } else { "" };
    outln!("lifetime        to the last clean unmount{crashed}:");
    outln!("                {} commits, {} syncs", l.commits, l.syncs);
    outln!("                {} payload bytes, {} journal bytes, {} final-location bytes", l.payload_bytes, l.journal_bytes, l.final_bytes);
    if l.payload_bytes > 0 {
        outln!("                {:.2} journal and {:.2} final-location bytes per payload byte", l.journal_bytes as f64 / l.payload_bytes as f64, l.final_bytes as f64 / l.payload_bytes as f64);
    }
    Ok(ExitCode::SUCCESS)
}

/// `okeanos tune`: the journal's features, turned on or off where asked.
pub(crate) fn tune(img: &ImageArg, enable: &[String], disable: &[String]) -> Result<ExitCode, String> {
    use okeanos::format::journal::jfeature;
    let bits = |names: &[String], all: bool| -> Result<u32, String> {
        names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()).try_fold(0u32, |acc, n| match (n, all) {
            ("all", true) => Ok(acc | jfeature::TUNABLE),
            _ => jfeature::by_name(n).map(|b| acc | b).ok_or_else(|| format!("{n}: no such journal feature (known: {})", jfeature::names(jfeature::KNOWN).join(", "))),
        })
    };
    let (on, off) = (bits(enable, true)?, bits(disable, false)?);
    let list = |f: u32| jfeature::names(f).join(" ");
    if on == 0 && off == 0 {
        let (dev, jdev) = devices_inspect(img)?;
        let (_, _, jsb, _) = okeanos::inspect::describe(dev, jdev).map_err(|e| e.to_string())?;
        outln!("journal features: {}", list(jsb.features));
        return Ok(ExitCode::SUCCESS);
    }
    let (dev, jdev) = devices(img, true)?;
    let t = okeanos::inspect::tune_journal(dev, jdev, on, off).map_err(|e| e.to_string())?;
    if t.before == t.after {
        outln!("journal features unchanged: {}", list(t.after));
    } else {
        let (added, removed) = (t.after & !t.before, t.before & !t.after);
        let mut what = Vec::new();
        if added != 0 {
            what.push(format!("turned on {}", list(added)));
        }
        if removed != 0 {
            what.push(format!("turned off {}", list(removed)));
        }
        outln!("{}; journal features: {}", what.join(", "), list(t.after));
    }
    Ok(ExitCode::SUCCESS)
}
