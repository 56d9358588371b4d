"""The data source Spark looks up as ``format("seglog")``: checks a query's
options and schema and hands out its readers and writers."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StructType

from .options import _read_options, _ReadOptions, _write_options
from .reader import _Reader
from .schema import SCHEMA, SCHEMA_WITH_HEADERS, _spark_schema
from .stream import _StreamReader
from .writer import _check_write_schema, _StreamWriter, _Writer


class SeglogDataSource(DataSource):
    """``format("seglog")``: Spark's Kafka source and sink over a seglog store."""

    @classmethod
    def name(cls) -> str:
        return "seglog"

    def schema(self) -> str:
        o = _read_options(self.options, streaming=None)
        return SCHEMA_WITH_HEADERS if o.include_headers else SCHEMA

    def _check_schema(self, schema: StructType, o: _ReadOptions) -> None:
        expected = _spark_schema(o.include_headers)
        if schema.simpleString() != expected.simpleString():
            raise ValueError(
                f"seglog source has a fixed schema ({expected.simpleString()}); got {schema.simpleString()}"
            )

    def reader(self, schema: StructType) -> DataSourceReader:
        o = _read_options(self.options, streaming=False)
        self._check_schema(schema, o)
        return _Reader(o)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        o = _read_options(self.options, streaming=True)
        self._check_schema(schema, o)
        return _StreamReader(o)

    def writer(self, schema: StructType, overwrite: bool) -> _Writer:
        if overwrite:
            raise ValueError("seglog sink: a log is append-only; use mode('append')")
        o = _write_options(self.options)
        _check_write_schema(schema, o)
        return _Writer(o)

    def streamWriter(self, schema: StructType, overwrite: bool) -> _StreamWriter:
        o = _write_options(self.options)
        _check_write_schema(schema, o)
        return _StreamWriter(o)
