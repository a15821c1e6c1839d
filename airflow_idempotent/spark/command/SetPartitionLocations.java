package airflowidempotent;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.catalog.CatalogStorageFormat;
import org.apache.spark.sql.catalyst.catalog.CatalogTable;
import org.apache.spark.sql.catalyst.catalog.CatalogTablePartition;
import org.apache.spark.sql.catalyst.catalog.CatalogUtils$;
import org.apache.spark.sql.catalyst.catalog.SessionCatalog;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.connect.planner.SparkConnectPlanner;
import org.apache.spark.sql.connect.plugin.CommandPlugin;
import org.apache.spark.sql.execution.command.CommandUtils$;
import org.sparkproject.connect.protobuf.Any;
import org.sparkproject.connect.protobuf.InvalidProtocolBufferException;
import org.sparkproject.connect.protobuf.StringValue;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A Spark Connect command that sets the locations of many partitions of one table in ONE catalog
 * call ({@code SessionCatalog.alterPartitions} with all of them): on the Hive metastore one
 * {@code alter_partitions} call, one metastore transaction, so every partition moves or none does
 * (tests/spark/test_spark_switch_batch.py). Spark SQL's {@code ALTER TABLE .. PARTITION (..) SET
 * LOCATION} passes one partition per call, with a table read, a partition read and a refresh around
 * each: 31 of them cost ~3x this one call (bench/results/spark.md).
 *
 * <p>Sent as {@code Command.extension}: a {@code google.protobuf.StringValue} holding JSON
 * {@code {"airflow_idempotent": "set_partition_locations", "database": "db" or null, "table": "t",
 * "locations": {"<column>=<value>": "<location>", ..}}}, one partition column. Any other command is
 * not this plugin's (false). Loaded by the Connect server with
 * {@code spark.connect.extensions.command.classes=airflowidempotent.SetPartitionLocations}.
 */
public final class SetPartitionLocations implements CommandPlugin {
  static final String STRING_VALUE = "type.googleapis.com/google.protobuf.StringValue";
  static final String KIND = "set_partition_locations";
  private static final ObjectMapper JSON = new ObjectMapper();

  @Override
  public boolean process(byte[] command, SparkConnectPlanner planner) {
    JsonNode request;
    try {
      Any any = Any.parseFrom(command);
      if (!STRING_VALUE.equals(any.getTypeUrl())) {
        return false;
      }
      request = JSON.readTree(StringValue.parseFrom(any.getValue()).getValue());
    } catch (InvalidProtocolBufferException | com.fasterxml.jackson.core.JsonProcessingException e) {
      return false;
    }
    if (request == null || !KIND.equals(request.path("airflow_idempotent").asText())) {
      return false;
    }
    try {
      apply(planner.session(), request);
    } catch (Exception e) { // the catalog's own error (no such table, partition..), to the client
      throw SetPartitionLocations.<RuntimeException>rethrow(e);
    }
    return true;
  }

  @SuppressWarnings("unchecked")
  private static <E extends Exception> E rethrow(Exception e) throws E {
    throw (E) e;
  }

  private static void apply(SparkSession session, JsonNode request) throws Exception {
    SessionCatalog catalog = session.sessionState().catalog();
    JsonNode db = request.get("database");
    TableIdentifier ident =
        new TableIdentifier(
            request.get("table").asText(),
            db == null || db.isNull() ? Option.empty() : Option.apply(db.asText()));
    CatalogTable table = catalog.getTableMetadata(ident);
    List<CatalogTablePartition> moved = new ArrayList<>();
    Iterator<Map.Entry<String, JsonNode>> it = request.get("locations").properties().iterator();
    while (it.hasNext()) {
      Map.Entry<String, JsonNode> entry = it.next();
      String[] kv = entry.getKey().split("=", 2);
      scala.collection.immutable.Map<String, String> spec =
          new scala.collection.immutable.Map.Map1<>(partitionColumn(table, kv[0]), kv[1]);
      CatalogTablePartition part = catalog.getPartition(table.identifier(), spec);
      CatalogStorageFormat s = part.storage();
      CatalogStorageFormat storage =
          s.copy(
              Option.apply(CatalogUtils$.MODULE$.stringToURI(entry.getValue().asText())),
              s.inputFormat(),
              s.outputFormat(),
              s.serde(),
              s.compressed(),
              s.properties());
      moved.add(
          part.copy(
              part.spec(),
              storage,
              part.parameters(),
              part.createTime(),
              part.lastAccessTime(),
              part.stats()));
    }
    if (!moved.isEmpty()) {
      catalog.alterPartitions(table.identifier(), CollectionConverters.asScala(moved).toList());
      // as ALTER TABLE .. SET LOCATION does after its one partition: drop stale statistics, or
      // invalidate the cached relation
      CommandUtils$.MODULE$.updateTableStats(session, table);
    }
  }

  private static String partitionColumn(CatalogTable table, String name) {
    scala.collection.Iterator<String> names = table.partitionColumnNames().iterator();
    while (names.hasNext()) {
      String column = names.next();
      if (column.equalsIgnoreCase(name)) {
        return column;
      }
    }
    throw new IllegalArgumentException(
        table.identifier().unquotedString() + " has no partition column " + name);
  }
}
