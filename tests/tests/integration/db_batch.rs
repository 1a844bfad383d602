//! The vendored tokio-postgres' batches (`vendor/tokio-postgres/PATCHES.md`):
//! several statements sent with one `Sync`, as the server sends the
//! authorization statement and the read that goes with it.

use std::time::SystemTime;
use tokio_postgres::Batch;
use tokio_postgres::error::SqlState;
use workspace_tests::TestContext;

#[tokio::test]
async fn a_batch_is_one_implicit_transaction_that_stops_at_its_first_failure() {
    let cx = TestContext::new("db_batch").await;
    let db = cx.db().await;
    db.batch_execute("CREATE TABLE batch_seen (n int)")
        .await
        .expect("a table");
    let started = db
        .prepare("SELECT transaction_timestamp(), pg_sleep(0.02)::text")
        .await
        .expect("prepare");
    let insert = db
        .prepare("INSERT INTO batch_seen VALUES ($1) RETURNING n")
        .await
        .expect("prepare");
    let divide = db.prepare("SELECT 10 / $1::int").await.expect("prepare");
    let count = async || -> i64 {
        db.query_one("SELECT count(*) FROM batch_seen", &[])
            .await
            .expect("count")
            .get(0)
    };

    // One implicit transaction: both statements see the same start, 20 ms
    // apart; sent one by one (each with its own `Sync`), they do not.
    let mut batch = Batch::new();
    batch.push(&started, [] as [&str; 0]).expect("push");
    batch.push(&started, [] as [&str; 0]).expect("push");
    assert_eq!(batch.len(), 2);
    let sets = db.query_batch(batch).await.expect("the batch");
    let at = |rows: &Vec<tokio_postgres::Row>| rows[0].get::<_, SystemTime>(0);
    assert_eq!(at(&sets[0]), at(&sets[1]));
    let (a, b) = (
        db.query(&started, &[]).await.expect("alone"),
        db.query(&started, &[]).await.expect("alone"),
    );
    assert_ne!(at(&a), at(&b));

    // The second of three fails: the first answered but is rolled back with
    // it (one transaction), the third did not run.
    let mut batch = Batch::new();
    batch.push(&insert, [1i32]).expect("push");
    batch.push(&divide, [0i32]).expect("push");
    batch.push(&insert, [2i32]).expect("push");
    let failed = db.query_batch(batch).await.expect_err("a division by zero");
    assert_eq!(failed.index, 1);
    assert_eq!(failed.error.code(), Some(&SqlState::DIVISION_BY_ZERO));
    assert_eq!(failed.done.len(), 1);
    assert_eq!(failed.done[0][0].get::<_, i32>(0), 1);
    assert_eq!(count().await, 0);

    // The connection goes on; a batch that succeeds commits.
    let mut batch = Batch::new();
    batch.push(&insert, [3i32]).expect("push");
    batch.push(&divide, [5i32]).expect("push");
    let sets = db.query_batch(batch).await.expect("the batch");
    assert_eq!(sets.len(), 2);
    assert_eq!(sets[1][0].get::<_, i32>(0), 2);
    assert_eq!(count().await, 1);
    // A parameter count that does not match is refused before sending.
    assert!(Batch::new().push(&divide, [1i32, 2]).is_err());

    // Many tasks on one connection, batches and single statements mixed,
    // some failing: each gets its own answers.
    let divide = &divide;
    let db = &db;
    let outcomes = futures::future::join_all((0..300i32).map(|k| async move {
        if k % 3 == 0 {
            let got = db.query_one(divide, &[&(k % 7)]).await;
            (k, got.map(|r| vec![r.get::<_, i32>(0)]).map_err(|e| (0, e)))
        } else {
            let mut batch = Batch::new();
            batch.push(divide, [k % 5 + 1]).expect("push");
            batch.push(divide, [k % 7]).expect("push");
            let got = db.query_batch(batch).await;
            (
                k,
                got.map(|sets| sets.iter().map(|rows| rows[0].get(0)).collect())
                    .map_err(|e| (e.index, e.error)),
            )
        }
    }))
    .await;
    for (k, got) in outcomes {
        match (k % 3, k % 7, got) {
            (0, 0, Err((0, e))) | (_, 0, Err((1, e))) => {
                assert_eq!(e.code(), Some(&SqlState::DIVISION_BY_ZERO), "{k}")
            }
            (0, d, Ok(values)) => assert_eq!(values, [10 / d], "{k}"),
            (_, d, Ok(values)) => assert_eq!(values, [10 / (k % 5 + 1), 10 / d], "{k}"),
            (_, _, got) => panic!("{k}: {:?}", got.map_err(|(i, e)| (i, e.to_string()))),
        }
    }
    cx.teardown().await;
}
