//! Serves the DigitalOcean fake on a free loopback port: prints its URL,
//! then serves until killed or until standard input closes.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    wasmprov_fake_digitalocean::serve(200)
        .await?
        .run_until_stopped()
        .await
}
