//! Tests of `fetcher`.

use super::*;

#[test]
fn a_cut_batch_at_the_end_is_left_for_the_next_fetch() {
    let mut one = vec![0u8; 8];
    one.extend_from_slice(&20i32.to_be_bytes());
    one.extend_from_slice(&[7u8; 20]);
    let two = [one.clone(), one.clone()].concat();
    assert_eq!(whole_batches(&Bytes::from(two.clone())), two);
    let cut = [one.clone(), one[..17].to_vec()].concat();
    assert_eq!(whole_batches(&Bytes::from(cut)), one);
    assert!(whole_batches(&Bytes::from(one[..11].to_vec())).is_empty());
    let mut negative = one.clone();
    negative[8..12].copy_from_slice(&(-5i32).to_be_bytes());
    assert!(whole_batches(&Bytes::from(negative)).is_empty());
}
