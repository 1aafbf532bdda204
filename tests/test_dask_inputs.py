"""The Dask engine reads its inputs as the in-memory reader does: item labels, the person
column, a file's unnamed label column, text booleans and long tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import privirt

#: the remedy that ends the refusal of a person label seen twice (in memory and by Dask)
UNIQUE = "make the person labels unique or merge the rows"

dask = pytest.importorskip("dask")
dd = pytest.importorskip("dask.dataframe")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
pytest.importorskip("pyarrow")


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None,
    ) as cluster, distributed.Client(cluster) as cl:
        yield cl


def _data(n=60, m=4, seed=2_200_000):
    rng = np.random.default_rng(seed)
    X = (rng.random((n, m)) < rng.uniform(0.2, 0.8, m)).astype(float)
    X[rng.random((n, m)) < 0.1] = np.nan
    return X


def test_array_items_are_matched_to_the_column_labels(client):
    X = _data()
    arr = da.from_array(X, chunks=(17, 4))
    for items in ([2, 3, 1, 0], [3, 0], ["3", "1"]):
        got = privirt.sufficient_statistics(arr, engine="dask", client=client, items=items)
        ref = privirt.sufficient_statistics(X, items=items)
        assert got.totals.tolist() == ref.totals.tolist()
        np.testing.assert_array_equal(got.counts[0], ref.counts[0])
        np.testing.assert_array_equal(got.counts[1], ref.counts[1])
        np.testing.assert_array_equal(got.answered, ref.answered)
    with pytest.raises(ValueError, match="item 'a' of `items` is not"):
        privirt.sufficient_statistics(arr, engine="dask", client=client, items=["a", "b", "c", "d"])
    # seeded private releases: the public item set in another order, and with an absent item
    for items in ([3, 2, 1, 0], [1, 0, 4, 3, 2]):
        got = privirt.release_counts(arr, engine="dask", client=client, epsilon=1.0,
                                     seed=2_200_001, items=items, n_persons=60)
        ref = privirt.release_counts(X, epsilon=1.0, seed=2_200_001, items=items, n_persons=60)
        pd.testing.assert_frame_equal(got.Y, ref.Y)
    with pytest.raises(ValueError, match="not in the public item set"):
        privirt.release_counts(arr, engine="dask", client=client, epsilon=1.0, seed=2_200_002,
                               items=[0, 1, 2], n_persons=60)


def test_person_col_that_names_no_column_is_refused_before_any_debit(tmp_path, capsys, client):
    from privirt.cli import main
    from privirt.stats.dask_engine import dask_statistics, public_source

    X = np.nan_to_num(_data(n=40, seed=2_200_010))
    frame = pd.DataFrame(X, columns=list("abcd"))
    path = tmp_path / "pc.parquet"
    frame.to_parquet(path, index=False)
    ddf = dd.from_pandas(frame, npartitions=2)
    for source in (path, ddf):
        with pytest.raises(ValueError, match="person_col 'sid' is not a column of the table"):
            dask_statistics(source, client=client, person_col="sid")
        with pytest.raises(ValueError, match="person_col 'sid' is not a column of the table"):
            public_source(source, items=None, n_persons=40, client=client, person_col="sid")
    ledger = privirt.Ledger(tmp_path / "l.ledger", epsilon=5.0, delta=1e-5)
    # the command line: one line, as the local reader words it, nothing spent
    base = ["estimate", str(path), "--person-col", "sid"]
    dask = ["--engine", "dask", "--scheduler", client.scheduler.address]
    for argv in (base, base + dask, base + dask + ["--epsilon", "1", "--n-persons", "40",
                                                   "--ledger", str(ledger.path)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err == "privirt: error: --person-col 'sid' is not a column of the table" + (
            f" {path}\n" if "dask" in argv else "\n")
    assert len(privirt.Ledger(tmp_path / "l.ledger").spends()) == 0
    # a Parquet file's pandas index column is a column, as locally
    labelled = frame.set_axis([f"s{i}" for i in range(40)]).rename_axis("sid")
    labelled.to_parquet(tmp_path / "ix.parquet")
    got = dask_statistics(tmp_path / "ix.parquet", client=client, person_col="sid")
    assert got.totals.tolist() == privirt.sufficient_statistics(
        privirt.as_responses(tmp_path / "ix.parquet", person_col="sid")).totals.tolist()


def test_unnamed_first_column_of_a_parquet_file_is_labels_on_both_engines(tmp_path, client):
    X = np.nan_to_num(_data(n=40, seed=2_200_020))
    csv = tmp_path / "un.csv"
    pd.DataFrame(X, columns=list("abcd"), index=[f"s{i}" for i in range(40)]).to_csv(csv)
    path = tmp_path / "un.parquet"
    pd.read_csv(csv).to_parquet(path, index=False)  # the row labels: column 'Unnamed: 0'
    ref = privirt.sufficient_statistics(X)
    for kw in ({}, {"engine": "dask", "client": client}):
        got = privirt.sufficient_statistics(path, **kw)
        assert list(got.items) == list("abcd")
        assert got.totals.tolist() == ref.totals.tolist()
        np.testing.assert_array_equal(got.counts[0], ref.counts[0])


def test_object_bool_column_with_missing_reads_alike_on_a_dask_dataframe(client):
    # dd.from_pandas turns the object column into text ("True", <NA>, "False")
    frame = pd.DataFrame({"a": [True, None, False, True, None, True],
                          "b": [True, True, False, False, True, False],
                          "c": [1.0, np.nan, 0.0, 1.0, 1.0, 0.0]})
    ref = privirt.sufficient_statistics(frame)
    got = privirt.sufficient_statistics(dd.from_pandas(frame, npartitions=2), engine="dask",
                                        client=client)
    assert got.totals.tolist() == ref.totals.tolist() == [3, 3, 3]
    np.testing.assert_array_equal(got.answered, ref.answered)
    np.testing.assert_array_equal(got.counts[0], ref.counts[0])
    # other text is still refused with one line
    bad = frame.assign(a=["yes", None, "no", "yes", None, "no"])
    with pytest.raises(ValueError, match="invalid response 'yes' for item 'a'"):
        privirt.sufficient_statistics(dd.from_pandas(bad, npartitions=2), engine="dask",
                                      client=client)


def test_long_table_on_dask_is_refused_as_a_long_table(tmp_path, capsys, client):
    from privirt.cli import main

    long = pd.DataFrame({"Person": ["s1", "s1", "s2", "s2", "s3", "s3"], "item": ["q1", "q2"] * 3,
                         "response": [1, 0, 0, 1, 1, 1]})
    path = tmp_path / "long.parquet"
    long.to_parquet(path, index=False)
    assert privirt.sufficient_statistics(path).totals.to_dict() == {"q1": 2, "q2": 2}
    for source in (path, dd.from_pandas(long, npartitions=2)):
        with pytest.raises(ValueError, match=r"^engine='dask' reads wide tables .* has the long "
                           r"layout \(columns Person, item, response\); convert the long table "
                           "or use engine='local'$"):
            privirt.sufficient_statistics(source, engine="dask", client=client)
    ledger = privirt.Ledger(tmp_path / "l.ledger", epsilon=5.0, delta=1e-5)
    assert main(["estimate", str(path), "--engine", "dask", "--scheduler", client.scheduler.address,
                 "--epsilon", "1", "--n-persons", "3", "--items", "q1,q2",
                 "--ledger", str(ledger.path)]) == 2
    err = capsys.readouterr().err
    assert err == (f"privirt: error: --engine dask reads wide tables (one column per item), and the "
                   f"table {path} has the long layout (columns Person, item, response); convert "
                   "the long table or use --engine local\n")
    assert len(privirt.Ledger(tmp_path / "l.ledger").spends()) == 0


def test_a_dask_frames_numeric_id_column_gets_the_person_col_hint_and_an_arrays_does_not(client):
    # a Dask DATAFRAME lost the in-memory reader's hint (its blocks reached the array path
    # without table=True); following the hint works on Dask, and arrays stay without it
    from privirt.stats.dask_engine import dask_statistics

    frame = pd.DataFrame({"id": [101, 205, 309, 412], "q1": [0, 1, 1, 0], "q2": [1, 0, 1, 1]})
    hint = "if column 'id' holds person labels, name it with person_col='id' (CLI: --person-col id)"
    with pytest.raises(ValueError, match="item 'id'") as info:
        dask_statistics(dd.from_pandas(frame, npartitions=2), client=client)
    assert hint in str(info.value) and "\n" not in str(info.value)
    got = dask_statistics(dd.from_pandas(frame, npartitions=2), client=client, person_col="id")
    assert got.totals.tolist() == privirt.sufficient_statistics(
        privirt.as_responses(frame, person_col="id")).totals.tolist()
    with pytest.raises(ValueError, match=r"invalid response (101|309)\.0 .*item 0 ") as info:
        dask_statistics(da.from_array(frame.to_numpy(dtype=float), chunks=(2, 3)), client=client)
    assert "person_col" not in str(info.value)


def test_a_dask_frames_bad_value_is_named_by_its_row_in_its_partition(client):
    """A bad number in partition k > 0 of a Dask DataFrame was reported as 'partition k: ...
    for person 5 (row 5)': a person label that is not the person's, taken from a per-partition
    offset of 0. A partition's offset in the table is not known without a pass over the data,
    so the cell is now named as a bad text value already was: 'at row i of partition k'."""
    from privirt.stats.dask_engine import dask_statistics

    X = np.zeros((40, 3))
    for (i, j), named in (((25, 1), "item 'b' at row 5 of partition 2"),
                          ((3, 2), "item 'c' at row 3 of partition 0")):
        Y = X.copy()
        Y[i, j] = 2.0
        ddf = dd.from_pandas(pd.DataFrame(Y, columns=list("abc")), npartitions=4)
        with pytest.raises(ValueError) as info:
            dask_statistics(ddf, client=client)
        msg = str(info.value)
        assert msg == f"invalid response 2.0 for {named}: responses must be 0, 1 or missing (NaN)", msg
    # arrays keep naming the row of the whole array (their block offsets are known)
    with pytest.raises(ValueError, match=r"^block 2: invalid response 2\.0 for person 25 "):
        dask_statistics(da.from_array(np.where(np.arange(40)[:, None] == 25, 2.0, X), chunks=(10, 3)),
                        client=client)


def test_items_leaving_out_many_columns_says_how_many(client):
    """The Dask engine's refusal listed the first five left-out items as if they were all."""
    X = _data(m=8)
    arr = da.from_array(X, chunks=(17, 8))
    with pytest.raises(ValueError, match=r"the data have 6 items \(the first 5: \[2, 3, 4, 5, 6\]\)"):
        privirt.release_counts(arr, engine="dask", client=client, epsilon=1.0, seed=2_200_002,
                               items=[0, 1], n_persons=60)


@pytest.mark.parametrize("method", ["private_totals_estimate", "private_spectral_estimate",
                                    "release_counts"])
def test_a_dask_collection_without_engine_dask_is_refused_before_any_debit(tmp_path, method):
    X = _data(n=40)
    ledger = privirt.Ledger(tmp_path / "l.db", epsilon=5.0, delta=1e-6)
    f = getattr(privirt, method)
    for source in (dd.from_pandas(pd.DataFrame(X, columns=list("abcd")), npartitions=2),
                   da.from_array(X, chunks=(17, 4))):
        for kw in ({}, {"items": list("abcd"), "n_persons": 40}):
            with pytest.raises(ValueError, match=r"^a dask collection is counted with engine='dask'$"):
                f(source, epsilon=1.0, ledger=ledger, **kw)
    assert ledger.spent().epsilon == 0


@pytest.mark.parametrize("module", ["dask.dataframe.core", "dask_expr._collection", "dask.array.core"])
def test_every_entry_point_tells_a_dask_collection_alike(module):
    """One test of "is this a dask collection?": dask 2024.x-2025.1 define the DataFrame in
    dask_expr, which the statistics API missed while pairwise_counts refused it."""
    fake = type("DataFrame", (), {"__module__": module, "__array__":
                                  lambda self, dtype=None, copy=None: np.eye(3)})()
    for call in (privirt.pairwise_counts, privirt.sufficient_statistics, privirt.item_totals,
                 lambda x: privirt.private_totals_estimate(x, epsilon=1.0, seed=2_200_010, n_boot=0)):
        with pytest.raises(ValueError, match=r"^a dask collection is counted with engine='dask'$"):
            call(fake)


@pytest.mark.parametrize("case", ["a set of items", "columns 5 and '5'"])
def test_both_engines_refuse_the_same_item_sets_in_the_same_words_before_any_debit(tmp_path, client, case):
    X = _data(n=40)
    if case == "a set of items":
        df, items_list = pd.DataFrame(X, columns=list("abcd")), [{"d", "c", "b", "a"}]
    else:
        df, items_list = pd.DataFrame(X[:, :3], columns=[5, "5", "x"]), [None, ["5", "x"], [5, "x"]]
    ledger = privirt.Ledger(tmp_path / "l.db", epsilon=5.0, delta=1e-6)
    for items in items_list:
        words = []
        for X_, kw in ((df, {}), (dd.from_pandas(df, npartitions=2), {"engine": "dask", "client": client})):
            with pytest.raises(ValueError) as err:
                privirt.private_totals_estimate(X_, epsilon=1.0, ledger=ledger, n_boot=0, items=items,
                                                n_persons=40, **kw)
            words.append(str(err.value))
        assert words[0] == words[1], (items, words)
        assert ("ordered sequence" in words[0]) if case == "a set of items" else ("same as text" in words[0])
    assert ledger.spent().epsilon == 0


@pytest.mark.parametrize("method", ["private_spectral_estimate", "release_counts"])
def test_device_gpu_with_the_dask_engine_is_refused_before_any_debit(tmp_path, method):
    """pairwise_counts and the CLI refuse device='gpu' with engine='dask' (the workers count
    on their CPUs); the private releases accepted it and counted on the CPUs."""
    X = _data(n=40)
    ledger = privirt.Ledger(tmp_path / "l.db", epsilon=5.0, delta=1e-6)
    source = da.from_array(X, chunks=(17, 4))
    with pytest.raises(ValueError, match=r"^engine='dask' counts on the workers' CPUs; got "
                                         r"device='gpu': pass device='auto' or 'cpu'"):
        getattr(privirt, method)(source, epsilon=1.0, ledger=ledger, device="gpu",
                                 engine="dask", n_persons=40)
    assert ledger.spent().epsilon == 0


def test_files_under_hidden_or_underscore_folders_are_skipped_as_by_pyarrow(tmp_path, client):
    """Only the base name was checked: a writer's leftovers under _temporary/ or .staging/ were
    counted too (rows counted twice, a larger sensitivity than the noise was calibrated for)."""
    import pyarrow.dataset as pads

    X = np.nan_to_num(_data(n=100, m=3, seed=55_000_000))
    df = pd.DataFrame(X, columns=list("abc"))
    (tmp_path / "_temporary" / "0").mkdir(parents=True)
    (tmp_path / ".staging").mkdir()
    (tmp_path / "sub").mkdir()
    df.iloc[:60].to_parquet(tmp_path / "part-0.parquet", index=False)
    df.iloc[60:].to_parquet(tmp_path / "sub" / "part-1.parquet", index=False)  # a plain subfolder is read
    df.iloc[:40].to_parquet(tmp_path / "_temporary" / "0" / "part-0.parquet", index=False)
    df.iloc[:10].to_parquet(tmp_path / ".staging" / "part-0.parquet", index=False)
    assert pads.dataset(tmp_path).count_rows() == 100
    got = privirt.sufficient_statistics(str(tmp_path), engine="dask", client=client)
    ref = privirt.sufficient_statistics(df)
    assert got.n_rows == 100
    assert got.totals.tolist() == ref.totals.tolist()
    # on a private path a public n_persons above 100 no longer hides the double count
    got = privirt.release_counts(str(tmp_path), engine="dask", client=client, epsilon=1.0,
                                 seed=55_000_001, n_persons=150)
    ref = privirt.release_counts(df, epsilon=1.0, seed=55_000_001, n_persons=150)
    pd.testing.assert_frame_equal(got.Y, ref.Y)


def test_duplicate_person_labels_are_refused_on_the_private_path_before_any_debit(tmp_path, capsys, client):
    """The person column was dropped unchecked: a person with two rows was released (the
    "replace one person's row" sensitivity broken) where the in-memory reader refuses."""
    from privirt.cli import main

    X = np.nan_to_num(_data(n=40, m=3, seed=55_000_010))
    df = pd.DataFrame(X, columns=list("abc"))
    df.insert(0, "person", [f"p{i}" for i in range(40)])
    df.loc[33, "person"] = "p5"  # p5 twice, in different files / partitions
    folder = tmp_path / "dup"
    folder.mkdir()
    df.iloc[:20].to_parquet(folder / "p0.parquet", index=False)
    df.iloc[20:].to_parquet(folder / "p1.parquet", index=False)
    with pytest.raises(ValueError, match=r"^duplicate person label 'p5' \(rows 5 and 33\): " + UNIQUE + "$"):
        privirt.release_counts(df, epsilon=1.0, seed=55_000_011)  # in memory
    ledger = privirt.Ledger(tmp_path / "l.db", epsilon=5.0, delta=1e-6)
    for source in (str(folder), dd.from_pandas(df, npartitions=3),
                   dd.from_pandas(df.set_index("person"), npartitions=3)):  # labels as the index
        for f, kw in ((privirt.release_counts, {}), (privirt.private_totals_estimate, {"n_boot": 0})):
            with pytest.raises(ValueError, match="^duplicate person label 'p5': " + UNIQUE + "$"):
                f(source, engine="dask", client=client, epsilon=1.0, ledger=ledger, n_persons=50, **kw)
    # within one partition as well
    with pytest.raises(ValueError, match="^duplicate person label 'p5': " + UNIQUE + "$"):
        privirt.release_counts(dd.from_pandas(df, npartitions=1), engine="dask", client=client,
                               epsilon=1.0, ledger=ledger, n_persons=50)
    assert ledger.spent().epsilon == 0
    ledger_path = tmp_path / "cli.db"
    assert main(["budget", "init", str(ledger_path), "--epsilon", "5", "--delta", "1e-6"]) == 0
    capsys.readouterr()
    rc = main(["estimate", str(folder), "--engine", "dask", "--epsilon", "1", "--n-persons", "50",
               "--ledger", str(ledger_path), "--out", str(tmp_path / "o.csv")])
    err = capsys.readouterr().err
    assert rc != 0 and (err.strip().splitlines()[-1]
                        == "privirt: error: duplicate person label 'p5': " + UNIQUE), err
    assert not (tmp_path / "o.csv").exists()
    assert privirt.Ledger(ledger_path).spent().epsilon == 0
    # distinct labels: released as in memory
    df.loc[33, "person"] = "p33"
    df.iloc[20:].to_parquet(folder / "p1.parquet", index=False)
    got = privirt.release_counts(str(folder), engine="dask", client=client, epsilon=1.0,
                                 seed=55_000_012, n_persons=50)
    ref = privirt.release_counts(df, epsilon=1.0, seed=55_000_012, n_persons=50)
    pd.testing.assert_frame_equal(got.Y, ref.Y)


def test_cli_private_dask_with_items_reads_files_of_different_columns(tmp_path, capsys, client):
    """The CLI first read the schema without --items and refused files whose columns differ
    (another order, an item a file lacks) with advice to pass the items it had been given."""
    from privirt.cli import main

    X = np.nan_to_num(_data(n=80, m=4, seed=55_000_020))
    df = pd.DataFrame(X, columns=list("abcd"))
    folder = tmp_path / "pq"
    folder.mkdir()
    df.iloc[:40].to_parquet(folder / "p0.parquet", index=False)
    df.iloc[40:][["d", "c", "a"]].to_parquet(folder / "p1.parquet", index=False)  # no b there
    full = df.copy()
    full.loc[40:, "b"] = np.nan
    full.to_csv(tmp_path / "x.csv", index=False)
    common = ["--epsilon", "1", "--n-persons", "90", "--method", "spectral", "--items", "a,b,c,d",
              "--seed", "55000021"]
    assert main(["estimate", str(tmp_path / "x.csv"), *common, "--out", str(tmp_path / "loc.csv")]) == 0
    rc = main(["estimate", str(folder), "--engine", "dask", "--scheduler", client.scheduler.address,
               *common, "--out", str(tmp_path / "dask.csv")])
    assert rc == 0, capsys.readouterr().err
    read = lambda name: pd.read_csv(tmp_path / name, comment="#")
    assert len(read("loc.csv")) == 4
    pd.testing.assert_frame_equal(read("dask.csv"), read("loc.csv"))


def test_a_malformed_scheduler_address_is_named_with_advice(tmp_path, capsys):
    """Only OSError was caught: 'host:abc' said "invalid literal for int() ..." and 'bogus'
    "missing port number", neither naming the scheduler address."""
    from privirt.cli import main
    from privirt.stats.dask_engine import dask_statistics

    folder = tmp_path / "pq"
    folder.mkdir()
    pd.DataFrame(np.nan_to_num(_data(n=20, m=3, seed=55_000_030)), columns=list("abc")).to_parquet(
        folder / "p.parquet", index=False)
    for address in ("host:abc", "bogus"):
        with pytest.raises(ValueError, match=rf"^cannot reach the Dask scheduler at '{address}' \(.*\); "
                                             "check the address or leave it out"):
            dask_statistics(str(folder), client=address)
        assert main(["estimate", str(folder), "--engine", "dask", "--scheduler", address]) != 0
        err = capsys.readouterr().err
        assert err.startswith(f"privirt: error: cannot reach the Dask scheduler at '{address}'"), err
        assert err.count("\n") == 1, err  # (its failures in loaded runs: the next test)


def test_a_malformed_scheduler_address_leaves_no_client_behind(tmp_path):
    """The cause of the test above failing in loaded full runs: ``Client(address)`` closes its
    client only when the connection fails, so a malformed address left one running (its event
    loop thread, the default client, dask's ``scheduler`` setting).  The garbage collector ran its
    finaliser whenever it ran; in the starting thread of the next client's event loop it waited
    for the lock that start holds: 10 s, then distributed's AssertionError instead of the message.
    The address is now checked before a client is made (a port out of range too: it was retried
    until the connect timeout)."""
    import gc
    import threading

    from privirt.stats.dask_engine import dask_statistics

    pd.DataFrame(np.nan_to_num(_data(n=20, m=3, seed=55_000_035)), columns=list("abc")).to_parquet(
        tmp_path / "p.parquet", index=False)
    loops = lambda: {t.ident for t in threading.enumerate() if t.name == "IO loop"}
    gc.collect()
    before, scheduler = loops(), dask.config.get("scheduler", None)
    gc.disable()  # a client left behind lives until a collection: look before one
    try:
        for address, why in (("host:abc", "invalid literal"), ("bogus", "missing port number"),
                             ("foo://x:1", "unknown address scheme 'foo'"),
                             ("tcp://127.0.0.1:99999", "port 99999 is not in 1-65535")):
            with pytest.raises(ValueError, match=rf"^cannot reach the Dask scheduler at '{address}' "
                                                 rf"\({why}.*\); check the address or leave it out"):
                dask_statistics(str(tmp_path), client=address)
            assert loops() == before, address  # no event loop thread of a client left running
            assert dask.config.get("scheduler", None) == scheduler, address
    finally:
        gc.enable()
        gc.collect()


def test_cli_seed_with_ledger_on_dask_is_refused_in_the_clis_words(tmp_path, capsys):
    """The Dask path had no CLI check and gave the library's words (seed=, ledger=)."""
    from privirt.cli import main

    folder = tmp_path / "pq"
    folder.mkdir()
    pd.DataFrame(np.nan_to_num(_data(n=20, m=3, seed=55_000_040)), columns=list("abc")).to_parquet(
        folder / "p.parquet", index=False)
    ledger = tmp_path / "l.db"
    assert main(["budget", "init", str(ledger), "--epsilon", "5", "--delta", "1e-6"]) == 0
    capsys.readouterr()
    rc = main(["estimate", str(folder), "--engine", "dask", "--epsilon", "1", "--n-persons", "20",
               "--seed", "55000041", "--ledger", str(ledger), "--out", str(tmp_path / "o.csv")])
    err = capsys.readouterr().err
    assert rc != 0 and err.count("\n") == 1, err
    assert err.startswith("privirt: error: --seed makes the noise reproducible") and "drop --seed" in err
    assert "--ledger for" in err and "seed=" not in err and "ledger=" not in err
    assert not (tmp_path / "o.csv").exists() and privirt.Ledger(ledger).spent().epsilon == 0


def test_a_parquet_data_set_without_row_groups_is_padded_on_the_private_path(tmp_path, client):
    """Files with a schema and no row group were refused ("no partitions") where in memory an
    empty table is n_persons persons without answers (as a file with one empty row group was)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("a", pa.int8()), ("b", pa.int8())])
    pq.ParquetWriter(tmp_path / "x.parquet", schema).close()
    assert pq.ParquetFile(tmp_path / "x.parquet").num_row_groups == 0
    got = privirt.release_counts(str(tmp_path), engine="dask", client=client, epsilon=1.0,
                                 seed=55_000_050, n_persons=10)
    ref = privirt.release_counts(np.empty((0, 2)), epsilon=1.0, seed=55_000_050, n_persons=10)
    np.testing.assert_array_equal(got.Y.to_numpy(), ref.Y.to_numpy())
    assert list(got.Y.index) == ["a", "b"]
    with pytest.raises(ValueError, match="no partitions"):  # without n_persons: nothing to count
        privirt.sufficient_statistics(str(tmp_path), engine="dask", client=client)


def test_items_get_the_datas_labels_on_both_engines(tmp_path, client):
    """With items=, the Dask engine returned the labels as given (3, 1) where the local engine
    keeps the data's ('3', '1')."""
    X = np.nan_to_num(_data(n=50, m=3, seed=55_000_060))
    df = pd.DataFrame(X, columns=["1", "2", "3"])
    df.to_parquet(tmp_path / "p.parquet", index=False)
    arr = da.from_array(X, chunks=(20, 3))
    for items, source, local in (([3, 1], str(tmp_path), df), (["3", "1"], str(tmp_path), df),
                                 (["2", "0"], arr, X), ([2, 0], arr, X)):
        got = privirt.sufficient_statistics(source, engine="dask", client=client, items=items)
        ref = privirt.sufficient_statistics(local, items=items)  # (an array's labels: 0 … 2)
        assert list(got.items) == list(ref.items), (items, list(got.items), list(ref.items))
        assert [type(i) for i in got.items] == [type(i) for i in ref.items]
        np.testing.assert_array_equal(got.counts[0], ref.counts[0])


def test_items_on_files_of_different_columns_follow_the_schema_errors_advice(tmp_path, client):
    """The schema error advised items=..., which then said an item that two files have "is not a
    column of the data" (one file lacked it).  An item a file lacks is all-missing there."""
    X = np.nan_to_num(_data(n=60, m=3, seed=55_000_070))
    df = pd.DataFrame(X, columns=list("abc"))
    df.iloc[:20].to_parquet(tmp_path / "p0.parquet", index=False)
    df.iloc[20:40][["c", "a"]].to_parquet(tmp_path / "p1.parquet", index=False)  # no b
    df.iloc[40:].to_parquet(tmp_path / "p2.parquet", index=False)
    with pytest.raises(ValueError, match=r"pass the item list as items="):
        privirt.sufficient_statistics(str(tmp_path), engine="dask", client=client)
    padded = df.copy()
    padded.loc[20:39, "b"] = np.nan
    for items in (["a", "b", "c"], ["b", "c"]):
        got = privirt.sufficient_statistics(str(tmp_path), engine="dask", client=client, items=items)
        ref = privirt.sufficient_statistics(padded, items=items)
        assert list(got.items) == list(ref.items)
        np.testing.assert_array_equal(got.answered, ref.answered)
        np.testing.assert_array_equal(got.counts[0], ref.counts[0])
        np.testing.assert_array_equal(got.score_hist, ref.score_hist)
    with pytest.raises(ValueError, match=r"^item 'zz' of `items` is not a column of any file of the data$"):
        privirt.sufficient_statistics(str(tmp_path), engine="dask", client=client, items=["a", "zz"])


def test_the_embedded_cluster_prints_nothing_when_port_8787_is_taken(tmp_path):
    """The embedded cluster's HTTP server took the default port 8787; when another program held
    it, distributed warned "Port 8787 is already in use" (a second line on the CLI's stderr)."""
    import socket
    import warnings

    from privirt.stats.dask_engine import dask_statistics

    pd.DataFrame(np.nan_to_num(_data(n=20, m=3, seed=55_000_080)), columns=list("abc")).to_parquet(
        tmp_path / "p.parquet", index=False)
    holder = socket.socket()
    try:
        holder.bind(("0.0.0.0", 8787))
        holder.listen()
    except OSError:
        pass  # already taken by another program: the same situation
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            assert dask_statistics(str(tmp_path)).n_rows == 20
    finally:
        holder.close()
    assert not [w for w in seen if "8787" in str(w.message)], [str(w.message) for w in seen]


def test_person_labels_equal_as_text_across_files_are_one_person(tmp_path, client):
    """Person 1 in one file and "1" in another: the in-memory reader refuses them (labels are
    compared as text); the Dask check compared raw values and released person 1 twice."""
    a = pd.DataFrame({"person": [1, 2, 3], "q1": [1, 0, 1], "q2": [0, 1, 1]})
    b = pd.DataFrame({"person": ["1", "4", "5"], "q1": [0, 0, 1], "q2": [1, 1, 0]})
    a.to_parquet(tmp_path / "a.parquet", index=False)
    b.to_parquet(tmp_path / "b.parquet", index=False)
    ledger = privirt.Ledger(tmp_path / "l.db", epsilon=5.0, delta=1e-6)
    with pytest.raises(ValueError, match="^duplicate person label '1': " + UNIQUE + "$"):
        privirt.private_totals_estimate(str(tmp_path), epsilon=1.0, n_persons=6, items=["q1", "q2"],
                                        engine="dask", client=client, ledger=ledger)
    mixed = pd.DataFrame({"person": [1, "1"], "q1": [1, 0], "q2": [0, 1]})  # one partition
    with dask.config.set({"dataframe.convert-string": False}):  # the object column kept
        ddf = dd.from_pandas(mixed, npartitions=1)
        with pytest.raises(ValueError, match="are the same as text"):
            privirt.release_counts(ddf, epsilon=1.0, n_persons=2, items=["q1", "q2"],
                                   engine="dask", client=client, ledger=ledger)
    assert ledger.spent().epsilon == 0


def test_parquet_names_are_matched_stripped_on_both_engines(tmp_path, client):
    """The local reader strips the spaces around a file's column names; the Dask engine kept
    them (items ' q2', 'q3 ' against the local engine's 'q2', 'q3')."""
    X = np.nan_to_num(_data(n=30, m=3, seed=5_700_000))
    pd.DataFrame(X, columns=["q1", " q2", "q3 "]).to_parquet(tmp_path / "a.parquet", index=False)
    local = privirt.sufficient_statistics(str(tmp_path / "a.parquet"))
    dask = privirt.sufficient_statistics(str(tmp_path), engine="dask", client=client)
    assert list(dask.items) == list(local.items) == ["q1", "q2", "q3"]
    assert dask.totals.tolist() == local.totals.tolist()
    got = privirt.release_counts(str(tmp_path), epsilon=1.0, seed=5_700_001, n_persons=30,
                                 items=["q1", "q2", "q3"], engine="dask", client=client)
    ref = privirt.release_counts(str(tmp_path / "a.parquet"), epsilon=1.0, seed=5_700_001,
                                 n_persons=30, items=["q1", "q2", "q3"])
    pd.testing.assert_frame_equal(got.Y, ref.Y)


@pytest.mark.parametrize("word", ["\u0661", "1_0"])
def test_numbers_a_csv_reader_does_not_read_are_refused_alike(tmp_path, client, word):
    """float() reads the Arabic-Indic digit one and "1_0"; a CSV reader does not: the local
    engine took them as answers and the Dask engine failed with Arrow's own message."""
    frame = pd.DataFrame({"q1": [word, "0", "1"], "q2": ["0", "1", "1"]})
    frame.to_parquet(tmp_path / "a.parquet", index=False)
    with pytest.raises(ValueError, match=f"invalid response {word!r}"):
        privirt.sufficient_statistics(str(tmp_path / "a.parquet"))
    with pytest.raises(ValueError, match=f"invalid response {word!r} for item 'q1'"):
        privirt.sufficient_statistics(str(tmp_path), engine="dask", client=client)


def test_a_named_file_that_is_not_parquet_is_refused_in_one_line(tmp_path):
    # pyarrow's "ArrowInvalid: Parquet magic bytes not found in footer ..." named neither the file
    # nor what to do (the command line had its own message)
    pytest.importorskip("dask")
    import privirt

    path = tmp_path / "d.csv"
    path.write_text("q0,q1\n1,0\n0,1\n")
    with pytest.raises(ValueError, match=r"d\.csv is not a Parquet file \(engine='dask' reads Parquet\); use "
                                         r"engine='local', or convert it to Parquet first$"):
        privirt.item_totals(str(path), engine="dask")
    ledger = privirt.Ledger(tmp_path / "l.db", epsilon=5.0, delta=1e-3)
    with pytest.raises(ValueError, match="is not a Parquet file"):
        privirt.private_totals_estimate(str(path), engine="dask", epsilon=1.0, n_persons=2,
                                        items=["q0", "q1"], n_boot=0, ledger=ledger)
    assert len(ledger.spends()) == 0


def test_text_true_false_reads_alike_on_both_engines():
    """docs/scale.md said the engines differ on text true/false (the Dask one read it, in any
    case, and the in-memory one refused it); both read the CSV reader's words and refuse others."""
    import privirt

    words = pd.DataFrame({"a": ["TRUE", "false", "True"], "b": ["false", "FALSE", "true"]})
    assert (privirt.item_totals(words).to_dict()
            == privirt.item_totals(dd.from_pandas(words, npartitions=2), engine="dask").to_dict()
            == {"a": 2, "b": 1})
    odd = pd.DataFrame({"a": ["tRuE", "false"], "b": ["true", "false"]})
    for data, engine in ((odd, "local"), (dd.from_pandas(odd, npartitions=1), "dask")):
        with pytest.raises(ValueError, match="tRuE"):
            privirt.item_totals(data, engine=engine)
