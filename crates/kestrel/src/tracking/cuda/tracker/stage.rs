//! The association stages of a scan: gate, then GNN (both stages) or JPDA (stage 1 of a
//! JPDA tracker), then the claims.

use super::super::super::associate::{gnn_costs, jpda_weights, EXACT_EVENTS};
use super::super::super::JpdaMarginals;
use super::GpuTracker;
use crate::cuda::args;
use crate::cuda::{as_bytes, Arg};
use crate::error::Result;

impl GpuTracker {
    /// One association stage: gate the tracks of status `want` (1 confirmed, against
    /// every detection; 0 tentative, against the unclaimed ones), GNN, and claim the
    /// picked detections. Records events `ev` (gated) and `ev + 1` (associated).
    pub(super) fn stage(&mut self, want: i32, n: usize, ndet: usize, ev: usize) -> Result<()> {
        let gpu = self.gpu.clone();
        let claimed = if want == 1 {
            Arg::Ptr(0)
        } else {
            self.claimed.ptr()
        };
        let gate_args = |fill: i32, this: &Self| -> Vec<Arg<'static>> {
            Vec::from(args![
                n as i32,
                want,
                this.cur.status,
                this.zhat.ptr(),
                this.lf.ptr(),
                this.hld.ptr(),
                Arg::F64(this.gamma),
                this.scratch,
                this.cstart.ptr(),
                this.order.ptr(),
                this.zs.ptr(),
                claimed,
                this.rows.ptr(),
                this.det.ptr(),
                this.ll.ptr(),
                fill
            ])
        };
        self.go("tk_gate", n, &gate_args(0, self))?;
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
        self.go("tk_gate", n, &gate_args(1, self))?;
        self.record(ev)?;
        let pick = if want == 1 { &self.pick1 } else { &self.pick2 };
        self.poison_buf(&pick.buf)?;
        if want == 1 && self.jpda.is_some() {
            return self.jpda_stage(n, ndet, m, ev);
        }
        let (gain, miss) = gnn_costs(self.cfg.pd, self.cfg.gate, self.cfg.clutter);
        self.gnn.solve(
            n,
            ndet,
            m,
            &self.rows.buf,
            &self.det.buf,
            &self.ll.buf,
            gain,
            miss,
            &pick.buf,
        )?;
        self.go(
            "tk_claim",
            n,
            &args![n as i32, pick.ptr(), self.claimed.ptr()],
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
            jp.solve(
                n,
                ndet,
                m,
                &self.rows.buf,
                &self.det.buf,
                &self.ll.buf,
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
            &args![
                Arg::Bytes(as_bytes(&self.params)),
                n as i32,
                self.cur.cap as u64,
                self.cur.x,
                self.cur.p,
                self.cur.status,
                self.rows.ptr(),
                self.det.ptr(),
                self.beta.ptr(),
                self.beta0.ptr(),
                self.z.ptr(),
                self.pick1.ptr(),
                self.claimed.ptr(),
                self.err
            ],
        )?;
        self.record(ev + 1)?;
        Ok(())
    }
}
