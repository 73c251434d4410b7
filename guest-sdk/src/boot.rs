//! A request's boot data in the forms clouds take it.

use base64::Engine as _;

use crate::BootData;

/// The user data, base64 (standard alphabet, padded), for clouds that take
/// it that way (Linode's `metadata.user_data`, EC2's `UserData`); `None`
/// when the request gives none. Any bytes go, UTF-8 or not.
#[must_use]
pub fn user_data_base64(boot: &BootData) -> Option<String> {
    boot.user_data
        .as_deref()
        .map(|d| base64::engine::general_purpose::STANDARD.encode(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_data_is_base64_or_absent() {
        let mut boot = BootData::default();
        assert_eq!(user_data_base64(&boot), None);
        boot.user_data = Some(b"#cloud-config\n\xff".to_vec());
        assert_eq!(
            user_data_base64(&boot).as_deref(),
            Some("I2Nsb3VkLWNvbmZpZwr/")
        );
    }
}
