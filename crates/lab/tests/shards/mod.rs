//! A long test dealt to shards: one `#[test]` per shard, each calling the test's body with its
//! shard number, and a check that there is a test for every shard.

/// `shard_tests!(body, SHARDS; name_0 = 0, name_1 = 1, ...)`.
macro_rules! shard_tests {
    ($body:ident, $count:expr; $($name:ident = $n:literal),* $(,)?) => {
        $(#[test]
        fn $name() {
            $body($n);
        })*
        #[test]
        fn every_shard_has_a_test() {
            assert_eq!([$($n),*].len(), $count);
        }
    };
}
