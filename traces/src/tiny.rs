fn main() { let v: Vec<u32> = (0..10).collect(); println!("{}", v.iter().sum::<u32>()); }
