-- Search latency: the full-text index without a pending list. With
-- fastupdate (the default), freshly ingested chunks wait in an unsorted
-- list that every search scans until a vacuum merges it (measured: 1.7 ms
-- of a 3 ms search statement after 10,000 chunks were added); without it,
-- ingestion pays the merge (small beside embedding) and searches do not.
ALTER INDEX kb_chunks_tsv_idx SET (fastupdate = off);
SELECT gin_clean_pending_list('kb_chunks_tsv_idx'::regclass);
