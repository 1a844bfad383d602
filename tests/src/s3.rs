//! A local S3 server for tests: `s3s-fs` (files under a directory, one
//! subdirectory per bucket) behind `s3s`, which checks SigV4 signatures
//! against one access key. Objects are put by writing files.

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

pub const ACCESS_KEY: &str = "AKIATESTWORKSPACE";
pub const SECRET_KEY: &str = "test-secret-key-that-must-never-be-shown";

pub struct LocalS3 {
    pub addr: SocketAddr,
    pub root: tempfile::TempDir,
    task: tokio::task::JoinHandle<()>,
}

impl LocalS3 {
    pub async fn start() -> LocalS3 {
        let root = tempfile::tempdir().expect("s3 root");
        let fs = s3s_fs::FileSystem::new(root.path()).expect("s3s-fs");
        let service = {
            let mut b = s3s::service::S3ServiceBuilder::new(fs);
            b.set_auth(s3s::auth::SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
            b.build()
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding s3");
        let addr = listener.local_addr().expect("address");
        let task = tokio::spawn(async move {
            let http = ConnBuilder::new(TokioExecutor::new());
            while let Ok((socket, _)) = listener.accept().await {
                let conn = http
                    .serve_connection(TokioIo::new(socket), service.clone())
                    .into_owned();
                tokio::spawn(async move {
                    let _ = conn.await;
                });
            }
        });
        LocalS3 { addr, root, task }
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Creates `bucket` (a directory).
    pub fn bucket(&self, bucket: &str) -> PathBuf {
        let dir = self.root.path().join(bucket);
        std::fs::create_dir_all(&dir).expect("bucket dir");
        dir
    }

    /// Puts an object (writes its file).
    pub fn put(&self, bucket: &str, key: &str, bytes: &[u8]) {
        let path: PathBuf = Path::new(&self.bucket(bucket)).join(key);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dirs");
        std::fs::write(path, bytes).expect("object");
    }
}

impl Drop for LocalS3 {
    fn drop(&mut self) {
        self.task.abort();
    }
}
