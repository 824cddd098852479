//! The association stages of a scan: gate, then GNN (both stages) or JPDA (stage 1 of a
//! JPDA tracker), then the claims.

use super::super::super::associate::{gnn_costs, jpda_weights, EXACT_EVENTS};
use super::super::super::JpdaMarginals;
use super::super::assign::Pairs;
use super::GpuTracker;
use crate::cuda::{as_bytes, Addr, Arg, Buf};
use crate::error::Result;
use crate::tracking::cuda::params::{TkClaim, TkGate, TkPda};

/// The stage's `m` gated pairs of `n` tracks and `ndet` detections (the gate's rows,
/// detections and log-likelihoods), borrowing those fields of the tracker alone.
macro_rules! pairs {
    ($t:expr, $n:expr, $ndet:expr, $m:expr) => {
        Pairs {
            n: $n,
            ndet: $ndet,
            m: $m,
            start: &$t.rows.buf,
            det: &$t.det.buf,
            ll: &$t.ll.buf,
        }
    };
}

impl GpuTracker {
    /// `tk_gate`'s parameters for the tracks of status `want`: the count pass (`fill`
    /// 0) or the fill pass (1).
    fn gate(&self, n: usize, want: i32, fill: i32) -> TkGate<'_> {
        // Stage 1 gates against every detection (no claims yet: a null pointer).
        let claimed: Buf = if want == 1 { &Addr(0) } else { &self.claimed };
        TkGate {
            n: n as i32,
            want,
            status: &self.cur.status,
            zhat: &self.zhat,
            lf: &self.lf,
            hld: &self.hld,
            gamma: self.gamma,
            scratch: &self.scratch,
            cstart: &self.cstart,
            order: &self.order,
            zs: &self.zs,
            claimed,
            rows: &self.rows,
            det: &self.det,
            ll: &self.ll,
            fill,
        }
    }

    /// One association stage: gate the tracks of status `want` (1 confirmed, against
    /// every detection; 0 tentative, against the unclaimed ones), GNN, and claim the
    /// picked detections. Records events `ev` (gated) and `ev + 1` (associated).
    pub(super) fn stage(&mut self, want: i32, n: usize, ndet: usize, ev: usize) -> Result<()> {
        let gpu = self.gpu.clone();
        self.go("tk_gate", n, &self.gate(n, want, 0))?;
        self.scan(self.rows.buf.ptr(), n)?;
        let m = self.read_u32(&self.rows.buf, n)? as usize;
        if want == 1 {
            // The prediction's error, known now that the stream has passed it.
            self.check_err("innovation covariance S")?;
        }
        self.det.ensure(&gpu, m)?;
        self.ll.ensure(&gpu, m)?;
        self.poison_buf(&self.det.buf)?;
        self.poison_buf(&self.ll.buf)?;
        self.go("tk_gate", n, &self.gate(n, want, 1))?;
        self.record(ev)?;
        let pick = if want == 1 { &self.pick1 } else { &self.pick2 };
        self.poison_buf(&pick.buf)?;
        if want == 1 && self.jpda.is_some() {
            return self.jpda_stage(n, ndet, m, ev);
        }
        let (gain, miss) = gnn_costs(self.cfg.pd, self.cfg.gate, self.cfg.clutter);
        self.gnn
            .solve(pairs!(self, n, ndet, m), gain, miss, &pick.buf)?;
        self.go(
            "tk_claim",
            n,
            &TkClaim {
                n: n as i32,
                pick,
                claimed: &self.claimed,
            },
        )?;
        self.record(ev + 1)?;
        Ok(())
    }

    /// Stage 1 by JPDA (the CPU's `Tracker::associate`): the marginals of the `m` gated
    /// pairs of the confirmed tracks, then `tk_pda`: the claims, the "detected" picks and
    /// the PDA update of every confirmed track with pairs. Records event `ev + 1`.
    fn jpda_stage(&mut self, n: usize, ndet: usize, m: usize, ev: usize) -> Result<()> {
        let gpu = self.gpu.clone();
        self.beta0.ensure(&gpu, n)?;
        self.beta.ensure(&gpu, m)?;
        self.poison_buf(&self.beta0.buf)?;
        self.poison_buf(&self.beta.buf)?;
        let (pd, pg, clutter) = (self.cfg.pd, self.cfg.gate, self.cfg.clutter);
        let (gain, log_miss) = jpda_weights(pd, pg, clutter);
        let exact_events = match self.cfg.marginals {
            JpdaMarginals::Auto => EXACT_EVENTS,
            JpdaMarginals::Lbp => 0.0,
        };
        if let Some(jp) = self.jpda.as_mut() {
            let pairs = pairs!(self, n, ndet, m);
            jp.solve(
                pairs,
                gain,
                log_miss,
                exact_events,
                &self.beta0.buf,
                &self.beta.buf,
            )?;
        }
        self.go(
            "tk_pda",
            n,
            &TkPda {
                mp: Arg::Bytes(as_bytes(&self.params)),
                n: n as i32,
                c: self.cur.cap as i64,
                xs: &self.cur.x,
                ps: &self.cur.p,
                status: &self.cur.status,
                rows: &self.rows,
                det: &self.det,
                beta: &self.beta,
                beta0: &self.beta0,
                z: &self.z,
                pick: &self.pick1,
                claimed: &self.claimed,
                err: &self.err,
            },
        )?;
        self.record(ev + 1)?;
        Ok(())
    }
}
