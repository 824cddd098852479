//! Unit tests of the slot bookkeeping; the numerics are tested against the batch filter
//! in `tests/kalman_state.rs`.

use super::*;
use crate::model::constant_velocity;

#[test]
fn slots_are_reused_lowest_first() {
    let m = constant_velocity(2, 1.0, 0.5, 4.0, 10.0).unwrap();
    let mut s = BatchState::<f64>::new(&m, 3).unwrap();
    assert_eq!(s.add().unwrap(), 0);
    assert_eq!(s.add().unwrap(), 1);
    assert_eq!(s.add().unwrap(), 2);
    assert!(s.add().is_err());
    s.remove(1).unwrap();
    s.remove(0).unwrap();
    assert!(s.remove(0).is_err());
    assert_eq!(s.add().unwrap(), 0);
    assert_eq!(s.live_slots().collect::<Vec<_>>(), vec![0, 2]);
    assert!(s.mean(1).is_none());
    assert!(s.means()[4..8].iter().all(|v| v.is_nan()));
}

#[test]
fn rejects_inconsistent_input() {
    let m = constant_velocity(1, 1.0, 0.5, 4.0, 10.0).unwrap();
    let mut s = BatchState::<f64>::new(&m, 2).unwrap();
    assert!(BatchState::<f64>::new(&m, 0).is_err());
    assert!(BatchState::<f64>::new(&m, usize::MAX / 2).is_err());
    assert!(s.add_with_prior(&[0.0], &[1.0]).is_err());
    assert!(s
        .add_with_prior(&[0.0, 0.0], &[1.0, 0.0, 0.0, -1.0])
        .is_err());
    assert!(s
        .add_with_prior(&[0.0, f64::NAN], &[1.0, 0.0, 0.0, 1.0])
        .is_err());
    let a = s.add().unwrap();
    assert!(s.update(&[1.0], None, None).is_err());
    assert!(s.update(&[1.0, f64::INFINITY], None, None).is_err());
    assert!(s.update(&[1.0, 2.0], Some(&[true]), None).is_err());
    assert!(matches!(s.predict_dt(0.5), Err(Error::Unsupported(_))));
    assert!(s.score(a, &[1.0]).is_err(), "score before measure");
    s.measure(None).unwrap();
    assert!(s.score(a, &[1.0, 2.0]).is_err());
    assert!(s.score(1, &[1.0]).is_err());
    let mut s = s
        .with_kinematics(Kinematics::constant_velocity(1, 0.5).unwrap())
        .unwrap();
    assert!(s.predict_dt(-1.0).is_err());
    assert!(s.predict_dt(f64::NAN).is_err());
    assert!(s
        .predict_with(&Prediction::new().per_target_dt(&[1.0]))
        .is_err());
    // A free slot's interval is not read.
    s.predict_with(&Prediction::new().per_target_dt(&[1.0, f64::NAN]))
        .unwrap();
    assert!(s
        .predict_with(&Prediction::new().control(&[0.0, f64::NAN, 0.0, 0.0]))
        .is_err());
}

#[test]
fn is_send_and_sync() {
    fn check<S: Send + Sync>() {}
    check::<BatchState<f32>>();
    check::<BatchState<f64>>();
}
