//! Replay counters as the hardware's: one reference to one untouched page is looked up once
//! (`dTLB-stores`, `dTLB-loads` and `iTLB-loads` count retired references, as Intel's
//! `mem_inst_retired.*` do), walks twice (the walk that finds the page not present, then the
//! walk of the retried access) and faults once. See `docs/replay.md`.

use mm::Profile;
use mm::arch::tlb::TlbEvent;
use trace::input::TraceReader;
use trace::maps::Mapping;
use trace::replay::{ReplayOptions, ReplayReport, replay};

const TEXT: u64 = 0x40_0000;
const DATA: u64 = 0x60_0000;

fn mapping(start: u64, write: bool, exec: bool, file: Option<&str>, line: u64) -> Mapping {
    Mapping {
        start,
        end: start + 0x1000,
        read: true,
        write,
        exec,
        shared: false,
        offset: 0,
        file: file.map(str::to_string),
        name: None,
        line,
    }
}

/// Replays a lackey trace of `lines` in a process with one page of text (a file) and one page
/// of anonymous data.
fn run(lines: &str) -> ReplayReport {
    let maps =
        [mapping(TEXT, false, true, Some("/bin/one"), 1), mapping(DATA, true, false, None, 2)];
    let raw: Box<dyn std::io::BufRead> = Box::new(std::io::Cursor::new(lines.as_bytes().to_vec()));
    let reader = TraceReader::from_reader(raw, "one.lackey", false, 0, Default::default()).unwrap();
    let options = ReplayOptions {
        profile: Profile::named("epyc-vm").unwrap(),
        text_thp: trace::replay::TextThp::Off,
        check_every_batch: true,
        max_events: engine::DEFAULT_EVENT_BUDGET,
        mark: None,
        at_mark: None,
    };
    replay(reader, "one.lackey", &maps, "one.maps", &options, &mut |_, _| {}).unwrap()
}

/// Given one store to an untouched anonymous page, then the replay counts one retired store,
/// two walks (the faulting one and the retry's) and one page fault.
#[test]
fn a_first_touch_store_is_one_store_two_walks_one_fault() {
    let r = run(&format!(" S {DATA:08x},8\n"));
    assert_eq!(r.stores, 1);
    assert_eq!(r.counter(TlbEvent::DtlbStores), 1);
    assert_eq!(r.counter(TlbEvent::DtlbStoreMisses), 2, "both attempts miss the first level");
    assert_eq!(r.counter(TlbEvent::DtlbWalks), 2);
    assert_eq!((r.counter(TlbEvent::DtlbLoads), r.counter(TlbEvent::ItlbWalks)), (0, 0));
    assert_eq!(r.page_faults, 1);
}

/// Given one load from an untouched anonymous page (which maps the zero page), then the same.
#[test]
fn a_first_touch_load_is_one_load_two_walks_one_fault() {
    let r = run(&format!(" L {DATA:08x},8\n"));
    assert_eq!(r.counter(TlbEvent::DtlbLoads), 1);
    assert_eq!(r.counter(TlbEvent::DtlbLoadMisses), 2);
    assert_eq!(r.counter(TlbEvent::DtlbWalks), 2);
    assert_eq!(r.counter(TlbEvent::DtlbStores), 0);
    assert_eq!(r.page_faults, 1);
}

/// Given one instruction fetch from an untouched page of text, then one iTLB lookup, two
/// instruction-side walks and one (major) fault; a second fetch of the page hits.
#[test]
fn a_first_fetch_is_one_lookup_two_walks_one_fault() {
    let r = run(&format!("I  {TEXT:08x},4\n"));
    assert_eq!(r.counter(TlbEvent::ItlbLoads), 1);
    assert_eq!(r.counter(TlbEvent::ItlbLoadMisses), 2);
    assert_eq!(r.counter(TlbEvent::ItlbWalks), 2);
    assert_eq!(r.counter(TlbEvent::DtlbWalks), 0);
    assert_eq!((r.page_faults, r.major_faults), (1, 1));
    let again = run(&format!("I  {TEXT:08x},4\nI  {:08x},4\n", TEXT + 16));
    assert_eq!(again.counter(TlbEvent::ItlbLoads), 2);
    assert_eq!(again.counter(TlbEvent::ItlbWalks), 2, "the second fetch hits");
}
