//! Linux memory management as executable models (placeholder until the mm core lands).
