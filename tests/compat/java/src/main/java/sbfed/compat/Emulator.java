package sbfed.compat;

import static sbfed.compat.Harness.map;

import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusMessage;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.ServiceBusSenderClient;
import com.azure.messaging.servicebus.administration.ServiceBusAdministrationClient;
import java.time.Duration;
import java.util.List;

/**
 * The official emulator's connection string (`UseDevelopmentEmulator=true`: plain AMQP), unchanged but for the
 * port: sends to and receives from a queue made through the administration client on the management port.
 */
final class Emulator {
    private Emulator() {
    }

    static Object run(String[] args) {
        String queue = args[0];
        ServiceBusAdministrationClient admin = Admin.client(Harness.adminConnectionString());
        admin.createQueue(queue);
        ServiceBusClientBuilder builder = new ServiceBusClientBuilder().connectionString(Harness.connectionString());
        try (ServiceBusSenderClient sender = builder.sender().queueName(queue).buildClient();
             ServiceBusReceiverClient receiver = builder.receiver().queueName(queue).buildClient()) {
            sender.sendMessage(new ServiceBusMessage("from the Java SDK").setMessageId("java-1"));
            List<ServiceBusReceivedMessage> got = Messages.receiveAll(receiver, 1, Duration.ofSeconds(10));
            got.forEach(receiver::complete);
            return map("body", got.get(0).getBody().toString(), "messageId", got.get(0).getMessageId(),
                "queue", admin.getQueue(queue).getName());
        }
    }
}
