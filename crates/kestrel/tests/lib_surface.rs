//! The library as a Rust user meets it: conversions to and from ndarray, constructors
//! from slices, options that are honoured or refused by name, errors that are not about
//! a command line.

use kestrel::kalman::{filter, FilterOptions, Keep};
use kestrel::model::{constant_velocity, model_from_str};
use kestrel::ndarray::{Array3, ShapeBuilder};
use kestrel::{filter_on, Device, Error, FilterMethod, Measurements, Model, ScanAlgorithm};

#[test]
fn measurements_and_estimates_through_ndarray() {
    let a = Array3::from_shape_fn((3, 4, 2), |(b, k, j)| (b * 100 + k * 10 + j) as f64);
    let owned = a.clone();
    let ptr = owned.as_ptr();
    let z = Measurements::from_array(owned).unwrap();
    assert_eq!(
        z.data().as_ptr(),
        ptr,
        "a standard-layout array is taken without a copy"
    );
    assert_eq!(z.at(2, 3), &[230.0, 231.0]);
    assert_eq!(z.view(), a.view());
    // Fortran order: copied into the NumPy layout.
    let f = Array3::from_shape_fn((3, 4, 2).f(), |(b, k, j)| (b * 100 + k * 10 + j) as f64);
    let zf = Measurements::from_array(f.clone()).unwrap();
    assert_eq!(zf, z);
    assert_eq!(Measurements::from_view(f.view()).unwrap(), z);
    assert!(Measurements::<f64>::from_slice(3, 4, 2, &[0.0; 23]).is_err());
    assert!(
        Measurements::<f64>::new(usize::MAX, 2, 2, vec![]).is_err(),
        "no overflow panic"
    );

    let m = constant_velocity(1, 1.0, 0.5, 2.0, 10.0).unwrap();
    let z1 = Measurements::from_view(a.view().slice(kestrel::ndarray::s![.., .., ..1])).unwrap();
    let est = filter(&m, &z1, &FilterOptions::default()).unwrap().filtered;
    let mean = est.mean_view().unwrap();
    assert_eq!(mean.dim(), (3, 4, 2));
    assert_eq!(mean[(1, 2, 0)], est.mean_at(1, 2)[0]);
    assert_eq!(est.cov_view().unwrap()[(2, 3, 1, 1)], est.cov_at(2, 3)[3]);
    let ll = est.loglik_view().unwrap().unwrap();
    assert_eq!(ll[(0, 1)], est.loglik().unwrap()[1]);
    let owned = est.clone();
    let ptr = owned.mean().as_ptr();
    let (mean, cov, ll) = owned.into_arrays().unwrap();
    assert_eq!(mean.as_ptr(), ptr, "owned arrays without a copy");
    assert_eq!((cov.dim(), ll.unwrap().dim()), ((3, 4, 2, 2), (3, 4)));
}

#[test]
fn models_from_slices_and_strings() {
    let m = Model::from_row_slices(
        2,
        1,
        &[1.0, 1.0, 0.0, 1.0],
        &[0.3, 0.5, 0.5, 1.0],
        &[1.0, 0.0],
        &[1.0],
        &[0.0, 0.0],
        &[10.0, 0.0, 0.0, 10.0],
    )
    .unwrap();
    assert_eq!(m.f()[(0, 1)], 1.0);
    assert_eq!(m.h()[(0, 0)], 1.0);
    let e = Model::from_row_slices(
        2,
        1,
        &[1.0; 3],
        &[1.0; 4],
        &[1.0; 2],
        &[1.0],
        &[0.0; 2],
        &[1.0; 4],
    )
    .unwrap_err();
    assert!(e.to_string().contains('F'), "{e}");
    assert!(Model::from_row_slices(
        2,
        1,
        &[1.0; 4],
        &[1.0; 4],
        &[1.0; 2],
        &[1.0],
        &[0.0; 3],
        &[1.0; 4]
    )
    .is_err());
    let t =
        model_from_str("[model]\nkind = \"cv\"\ndims = 1\ndt = 1.0\nq = 0.5\nr = 2.0\n").unwrap();
    assert_eq!(t.nx(), 2);
    let e = model_from_str("[model]\nkind = \"cv\"\n").unwrap_err();
    assert!(e.to_string().starts_with("<string>"), "{e}");
    assert!(
        !e.to_string().contains("--"),
        "no command-line wording: {e}"
    );
    // A changed R is checked.
    assert!(m
        .clone()
        .with_r(kestrel::nalgebra::DMatrix::from_element(1, 1, -1.0))
        .is_err());
}

#[test]
fn options_are_honoured_or_refused_by_name() {
    let m = constant_velocity(1, 1.0, 0.5, 2.0, 10.0).unwrap();
    let z = Measurements::new(2, 5, 1, vec![1.0; 10]).unwrap();
    let par = FilterMethod::Parallel(ScanAlgorithm::default());
    let last = FilterOptions::default().with_keep(Keep::Last);
    match filter_on(Device::Cpu, &m, &z, par, &last) {
        Err(Error::Unsupported(msg)) => assert!(msg.contains("Keep::Last"), "{msg}"),
        other => panic!("Keep::Last with the parallel filter: {other:?}"),
    }
    let pred = FilterOptions::default().with_predicted(true);
    match filter_on(Device::Cpu, &m, &z, par, &pred) {
        Err(Error::Unsupported(msg)) => assert!(msg.contains("predicted"), "{msg}"),
        other => panic!("predicted with the parallel filter: {other:?}"),
    }
    // The sequential filter honours both.
    let s = filter_on(Device::Cpu, &m, &z, FilterMethod::Sequential, &last).unwrap();
    assert_eq!(s.filtered.steps(), 1);
}

#[test]
fn a_missing_gpu_is_not_bad_input() {
    if kestrel::cuda::available(0).is_ok() {
        eprintln!("a GPU is present: the missing-GPU error is not checked");
        return;
    }
    let e = Device::parse("cuda").unwrap_err();
    assert!(matches!(e, Error::DeviceUnavailable(_)), "{e}");
    assert!(!e.is_bad_input());
    assert!(!e.to_string().contains("--device"), "{e}");
    assert!(Device::parse("tpu").unwrap_err().is_bad_input());
}
