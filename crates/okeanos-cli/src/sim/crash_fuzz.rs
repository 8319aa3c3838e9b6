//! `okeanos sim --crash-fuzz`: random workloads under every policy, crashes at random points,
//! recovery, fsck and the policy's guarantee after each; a violation prints its seed.

use super::*;

pub(super) fn crash_fuzz(a: &SimArgs) -> Result<ExitCode, String> {
    use okeanos_sim::crashfuzz;
    let modes: Vec<ContentConfig> = match &a.modes {
        Some(m) => m.split(',').map(|x| ContentConfig::parse(x.trim())).collect::<Result<_, _>>()?,
        None => crashfuzz::ALL.iter().map(|m| ContentConfig::parse(m)).collect::<Result<_, _>>()?,
    };
    let journal = crashfuzz::FuzzJournal::parse(&a.fuzz_journal)?;
    if modes.is_empty() || a.runs == 0 || a.points == 0 {
        return Err("--crash-fuzz needs at least one mode, one run and one point".into());
    }
    let seeds: Vec<u64> = (0..a.runs).map(|k| a.seed.wrapping_add(k)).collect();
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
    let t0 = Instant::now();
    let results = parallel(&seeds, jobs, false, |&seed| crashfuzz::run_seed(seed, &modes, a.points, a.canary, journal));
    let mut per_mode: std::collections::BTreeMap<String, (u64, usize, usize)> = Default::default();
    let mut violations = Vec::new();
    let mut errors = Vec::new();
    let mut overlaps = 0;
    let mut copied = 0;
    let mut swaps = 0;
    let mut snapshots = 0;
    let mut fallbacks = 0;
    let mut for_bytes = 0;
    let (mut in_place, mut tagged) = (0, 0);
    let mut journals: std::collections::BTreeMap<&'static str, usize> = Default::default();
    for (seed, r) in seeds.iter().zip(results) {
        match r {
            Ok(r) => {
                overlaps += r.overlaps;
                copied += r.copied;
                swaps += r.swaps;
                snapshots += r.snapshots;
                fallbacks += r.fallbacks;
                for_bytes += r.batch_for_bytes as usize;
                in_place += r.in_place;
                tagged += r.in_place_tagged;
                *journals.entry(r.journal).or_default() += 1;
                let e = per_mode.entry(r.mode.clone()).or_default();
                e.0 += 1;
                e.1 += r.states;
                e.2 += r.violations.len();
                violations.extend(r.violations);
            }
            Err(e) => errors.push(format!("seed {seed}: {e}")),
        }
    }
    println!("{:<18} {:>6} {:>8} {:>11}", "mode", "runs", "states", "violations");
    for (m, (runs, states, v)) in &per_mode {
        println!("{m:<18} {runs:>6} {states:>8} {v:>11}");
    }
    let states: usize = per_mode.values().map(|x| x.1).sum();
    println!("runs by journal: {}", journals.iter().map(|(j, n)| format!("{j} {n}")).collect::<Vec<_>>().join(", "));
    println!("{} runs, {states} crash states, {} violations, {} errors in {:.1} s{}; {overlaps} commits beside a checkpoint, {copied} blocks copied home from manylogs logs, {swaps} log swaps, {snapshots} map snapshots, {fallbacks} fallbacks from a dead journal server, {for_bytes} runs batching for bytes, {in_place} blocks written in place by commits ({tagged} of them new blocks beside their commits, by in-place tags)", a.runs, violations.len(), errors.len(), t0.elapsed().as_secs_f64(), if a.canary { " (canary: the placement's ordering broken)" } else { "" });
    for v in violations.iter().take(20) {
        println!("VIOLATION {v}");
    }
    for e in errors.iter().take(20) {
        println!("ERROR {e}");
    }
    if let Some(first) = violations.first().or(errors.first()) {
        let seed = first.split_whitespace().nth(1).unwrap_or("?").trim_end_matches(':');
        let on = if journal.is_some() { format!(" --journal {}", a.fuzz_journal) } else { String::new() };
        println!("reproduce: okeanos sim --crash-fuzz --seed {seed} --runs 1 --points {}{on}{}", a.points, if a.canary { " --canary" } else { "" });
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
