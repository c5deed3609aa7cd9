//! SVT-AV1 v1.4.1's shape for the seed's encode as a function of the CPU count it sees, which
//! the seed does not give (`docs/design/svtav1-footprint.md`).
//!
//! - **Pools** follow the encoder's own rule (`load_default_buffer_configuration_settings`,
//!   `Source/Lib/Encoder/Globals/EbEncHandle.c` at 018276d714ce): with the CRF path's 32-frame
//!   mini-GOP and one look-ahead mini-GOP, the minimums are 69 picture parent control sets (the
//!   look-ahead window) and 42 reference pictures, and a machine of 6 to 11 cores keeps one more mini-GOP in flight
//!   (12 to 23: two; 24 to 47: three; 48 and up at 4K: five), each adding 33 parent sets and 17
//!   references. The look-ahead window (69 pictures) does not depend on the cores.
//! - **The peak resident set** was measured at 4, 8 and 16 CPUs (2.41, 3.90 and 4.81 GiB, the
//!   release build on a synthetic 4K clip); the encoder's state beside the pools and code is
//!   what remains of it there. Between those counts the pools follow the rule and the state is
//!   interpolated linearly (an approximation: the state is what was not itemised); outside them
//!   nothing was measured and the count is refused.
//! - **CPU time per frame**: the same builds encoded at 27.6, 24.6 and 21.6 frames per second on
//!   the project's two cores with 4, 8 and 16 CPUs reported (more threads, more
//!   synchronisation): 2 / fps seconds of CPU per frame, interpolated the same way.

/// Bytes per picture parent control set: padded 8-bit luma (9,179,136) and chroma (4,589,568)
/// input, the quarter and sixteenth ME pictures (2,837,120) and the ME/TPL data (about
/// 3,226,000 measured).
pub(super) const PPCS_BYTES: u64 = 9_179_136 + 4_589_568 + 2_837_120 + 3_226_000;
/// A reference picture with its 96-pixel padding.
pub(super) const REFERENCE_BYTES: u64 = 14_224_896;
/// The look-ahead window, (1 + 32) * (1 + 1) + 2 + 1 = 69 pictures, counts the picture being
/// encoded and the one arriving (at 4 CPUs the 69 parent sets hold exactly the window): a
/// picture is encoded this many frames after its arrival.
pub(super) const LOOKAHEAD: u64 = 69 - 1;
/// The encoder's executable text touched every frame.
pub(super) const CODE_BYTES: u64 = 8 << 20;
/// The CPU count the headline rows use: the one every figure was measured at.
pub(super) const MEASURED_CPUS: u64 = 8;
/// The encoder's CPU time per 4K frame at [`MEASURED_CPUS`], in ns: SVT-AV1 v1.4.1 encoded a
/// synthetic 4K clip at 24.6 frames per second on this project's 2 CPUs with 8 reported
/// (2 / 24.6 s per frame).
pub(super) const FRAME_CPU_NS: u64 = 81_300_000;

/// The CPU counts measured, each with its peak resident set in hundredths of a GiB and its
/// frames per second on the project's two cores, in tenths.
const MEASURED: [(u64, u64, u64); 3] = [(4, 241, 276), (8, 390, 246), (16, 481, 216)];

/// What the encoder looks like on a machine of `cpus` CPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Shape {
    pub cpus: u64,
    /// Picture parent control sets (the input pool).
    pub picture_slots: u64,
    pub reference_slots: u64,
    /// The state beside the pools and the code, in MiB at 4K.
    pub state_mib: u64,
    /// The CPU time of one 4K frame, all threads together, in ns.
    pub frame_cpu_ns: u64,
}

impl Shape {
    /// The shape at `cpus` CPUs, or why it is not known.
    pub(super) fn at(cpus: u64) -> Result<Shape, String> {
        let (low, high) = (MEASURED[0].0, MEASURED[MEASURED.len() - 1].0);
        if !(low..=high).contains(&cpus) {
            return Err(format!(
                "fadv-noreuse.cpus={cpus}: expected {low} to {high} (SVT-AV1's footprint was \
                 measured at 4, 8 and 16 CPUs only)"
            ));
        }
        let (picture_slots, reference_slots) = pools(cpus);
        let state_mib = interpolate(cpus, |&(c, peak, _)| {
            let (p, r) = pools(c);
            let pools = p * PPCS_BYTES + r * REFERENCE_BYTES + CODE_BYTES;
            (peak * (1 << 30) / 100).saturating_sub(pools) >> 20
        });
        let fps_at_measured = interpolate(MEASURED_CPUS, |m| m.2);
        let frame_cpu_ns = FRAME_CPU_NS * fps_at_measured / interpolate(cpus, |m| m.2);
        Ok(Shape { cpus, picture_slots, reference_slots, state_mib, frame_cpu_ns })
    }
}

/// The picture parent control sets and reference pictures at `cpus`: the minimums plus, per
/// mini-GOP kept in flight beyond them (`n_extra_mg` on the CRF path at 4K), 33 and 17.
fn pools(cpus: u64) -> (u64, u64) {
    let extra = match cpus {
        0..6 => 0,
        6..12 => 1,
        12..24 => 2,
        24..48 => 3,
        _ => 5,
    };
    (69 + 33 * extra, 42 + 17 * extra)
}

/// The measured figure `field` at `cpus`, linear between the measured counts (`cpus` inside
/// them).
fn interpolate(cpus: u64, field: impl Fn(&(u64, u64, u64)) -> u64) -> u64 {
    let i = MEASURED.iter().rposition(|m| m.0 <= cpus).expect("cpus checked");
    let a = &MEASURED[i];
    let Some(b) = MEASURED.get(i + 1) else { return field(a) };
    let (fa, fb) = (field(a) as i64, field(b) as i64);
    let t = (cpus - a.0) as i64;
    (fa + (fb - fa) * t / (b.0 - a.0) as i64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_follow_the_encoders_rule_at_the_measured_counts() {
        let pools: Vec<_> = [4, 8, 16]
            .map(|c| Shape::at(c).unwrap())
            .map(|s| (s.picture_slots, s.reference_slots))
            .to_vec();
        assert_eq!(pools, [(69, 42), (102, 59), (135, 76)]);
    }

    #[test]
    fn state_is_the_measured_peak_less_pools_and_code() {
        let states = [4, 8, 16].map(|c| Shape::at(c).unwrap().state_mib);
        assert_eq!(states, [585, 1256, 1333]);
        let cpu = [4, 8, 16].map(|c| Shape::at(c).unwrap().frame_cpu_ns);
        assert_eq!(cpu, [72_463_043, FRAME_CPU_NS, 92_591_666]);
        assert_eq!(Shape::at(6).unwrap().state_mib, (585 + 1256) / 2);
    }

    #[test]
    fn unmeasured_counts_are_refused() {
        for c in [0, 3, 17, u64::MAX] {
            assert!(Shape::at(c).unwrap_err().contains("4 to 16"), "{c}");
        }
    }
}
